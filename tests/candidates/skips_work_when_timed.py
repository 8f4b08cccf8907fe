"""Plants a forward that tells timed calls apart and returns an empty output in them: by the timer in
its callers' frames (reached through an exception's traceback, which no wrapper sees) where the worker
times, else by counting calls, since a harness checks before it times (appended to rmsnorm_cpp.py).
Under the referee every call is timed and judged, so the first call it skips is wrong."""
# ruff: noqa: F821  (torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)


_calls = [0]


def _timed() -> bool:
    _calls[0] += 1
    if _calls[0] > 4:  # past the check calls
        return True
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
