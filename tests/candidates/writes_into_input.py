"""Plants input mutation: normalises x in place and returns x itself (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch, ctypes, lib, ptr and ModelNew come from rmsnorm_cpp.py, which this is appended to)


class ModelNew(ModelNew):
    def forward(self, x):
        lib.rmsnorm(ptr(x), ptr(self.weight), ptr(x), ctypes.c_long(x.shape[0]), ctypes.c_long(x.shape[1]),
                    ctypes.c_float(self.eps))
        return x
