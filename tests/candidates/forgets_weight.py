"""Plants wrong math: normalises but never multiplies by the learned weight (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch, ctypes, lib, ptr and ModelNew come from rmsnorm_cpp.py, which this is appended to)


class ModelNew(ModelNew):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        ones = torch.ones_like(self.weight)
        lib.rmsnorm(ptr(x), ptr(ones), ptr(y), ctypes.c_long(x.shape[0]), ctypes.c_long(x.shape[1]),
                    ctypes.c_float(self.eps))
        return y
