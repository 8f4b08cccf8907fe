"""Plants a forward that finds the timer in its callers' frames (reached through an exception's
traceback, which no wrapper sees) and returns an empty output when timed: the one timed call the
harness keeps at random is wrong (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)


def _timed() -> bool:
    try:
        raise RuntimeError
    except RuntimeError as exc:
        frame = exc.__traceback__.tb_frame
    while frame is not None:
        if frame.f_code.co_name == "time_calls":
            return True
        frame = frame.f_back
    return False


class ModelNew(ModelNew):
    def forward(self, x):
        if _timed():
            return torch.empty_like(x)
        return super().forward(x)
