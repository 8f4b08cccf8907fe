"""Legitimate: KernelBench's cross-entropy loss (a scalar output) as a C++ kernel."""

import ctypes

import torch
from torch import nn

from harness.platforms.cpu import compile_cpp, ptr

lib = compile_cpp(r"""
#include <cmath>
extern "C" void cross_entropy(const float* x, const long* t, float* out, long rows, long cols) {
  double total = 0.0;
  #pragma omp parallel for reduction(+:total)
  for (long r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float m = -INFINITY;
    for (long c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    double s = 0.0;
    for (long c = 0; c < cols; ++c) s += std::exp((double)(xr[c] - m));
    total += (double)m + std::log(s) - (double)xr[t[r]];
  }
  *out = (float)(total / rows);
}
""")


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        x, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), dtype=torch.float32)
        lib.cross_entropy(ptr(x), ptr(t), ptr(out), ctypes.c_long(x.shape[0]), ctypes.c_long(x.shape[1]))
        return out
