"""Class 6, timed calls overwrite their own input: from its fourth call on (past the check seeds) it
writes its output into its input, so the kept (input, output) pair of a timed call agrees with
itself (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (ModelNew comes from rmsnorm_cpp.py, which this is appended to)

_calls = [0]


class ModelNew(ModelNew):
    def forward(self, x):
        _calls[0] += 1
        y = super().forward(x)
        if _calls[0] > 3:
            x.copy_(y)
            return x
        return y
