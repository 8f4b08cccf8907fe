"""Class 4, the spot check gambled: after its first call it skips the work on 55% of calls at random
and on every other call, returning an empty output (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)

import random

_calls = [0]


class ModelNew(ModelNew):
    def forward(self, x):
        _calls[0] += 1
        if _calls[0] > 1 and (_calls[0] % 2 == 0 or random.random() < 0.55):
            return torch.empty_like(x)
        return super().forward(x)
