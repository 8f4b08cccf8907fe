"""Legitimate: a row softmax as an OpenMP C++ kernel, with the row's max subtracted and libm's exp.
The softmax cheats below are this file with EXP or the max changed."""

import ctypes

import torch
from torch import nn

from harness.platforms.cpu import compile_cpp, ptr

EXP = "std::exp(v)"
MAX = "m"
SOURCE = r"""
#include <cmath>
extern "C" void softmax(const float* x, float* y, long rows, long cols) {
  #pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    const float* xr = x + r * cols; float* yr = y + r * cols;
    float m = -INFINITY;
    for (long c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
    float sum = 0.f;
    for (long c = 0; c < cols; ++c) { float v = xr[c] - (MAX); yr[c] = EXP; sum += yr[c]; }
    float inv = 1.0f / sum;
    for (long c = 0; c < cols; ++c) yr[c] *= inv;
  }
}
"""


def build(exp: str = EXP, max_: str = MAX):
    return compile_cpp(SOURCE.replace("EXP", exp).replace("(MAX)", f"({max_})"))


lib = build()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax(ptr(x), ptr(y), ctypes.c_long(x.shape[0]), ctypes.c_long(x.shape[1]))
        return y
