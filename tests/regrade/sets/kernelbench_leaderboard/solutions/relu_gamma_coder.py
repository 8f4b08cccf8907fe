import ctypes

import torch
from torch import nn

from harness.platforms.cpu import compile_cpp, ptr

lib = compile_cpp(r"""
extern "C" void relu(const float* x, float* y, long n) {
    for (long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}
""")


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu(ptr(x), ptr(y), ctypes.c_long(x.numel()))
        return y
