"""Plants a subclass output: forward returns its (correct) result as a torch.Tensor subclass, the
carrier a lazy result needs; outputs must be exactly torch.Tensor (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)


class Carrier(torch.Tensor):
    pass


class ModelNew(ModelNew):
    def forward(self, x):
        return super().forward(x).as_subclass(Carrier)
