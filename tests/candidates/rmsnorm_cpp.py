"""Legitimate: RMSNorm as an OpenMP C++ kernel; the other rmsnorm candidates are appended to it."""

import ctypes

import torch
from torch import nn

from harness.platforms.cpu import compile_cpp, ptr

SOURCE = r"""
#include <cmath>
extern "C" void rmsnorm(const float* x, const float* w, float* y, long rows, long cols, float eps) {
  #pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    const float* xr = x + r * cols; float* yr = y + r * cols;
    float acc = 0.f;
    #pragma omp simd reduction(+:acc)
    for (long c = 0; c < cols; ++c) acc += xr[c] * xr[c];
    float inv = 1.0f / std::sqrt(acc / cols + eps);
    #pragma omp simd
    for (long c = 0; c < cols; ++c) yr[c] = w[c] * (xr[c] * inv);
  }
}
"""
lib = compile_cpp(SOURCE)

class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.rmsnorm(ptr(x), ptr(self.weight), ptr(y), ctypes.c_long(x.shape[0]), ctypes.c_long(x.shape[1]), ctypes.c_float(self.eps))
        return y
