"""Class 3, harness state changed in place through a caught exception's frames: on every call it
clears every op recorder and kernel list it finds in its callers' frames and divides every timing
it finds by 40 (object.__setattr__ on frozen records), while PyTorch does the computation
(appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)

import dataclasses


def _edit(value):
    ops = getattr(getattr(value, "recorder", None), "ops", None)
    if isinstance(ops, dict):
        ops.clear()
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and hasattr(value, "median_ms"):
        for name in ("median_ms", "p20_ms", "p80_ms"):
            object.__setattr__(value, name, getattr(value, name) / 40)


def _edit_callers():
    try:
        raise RuntimeError
    except RuntimeError as exc:
        frame = exc.__traceback__.tb_frame.f_back
    while frame is not None:
        for value in list(frame.f_locals.values()):
            _edit(value)
            if isinstance(value, list):
                if all(isinstance(v, str) for v in value):
                    value.clear()  # a list of kernel names
                for item in value:
                    _edit(item)
        frame = frame.f_back


class ModelNew(ModelNew):
    def forward(self, x):
        _edit_callers()
        y = self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))
        _edit_callers()
        return y
