"""Legitimate: RMSNorm as a C++ extension built by torch.utils.cpp_extension.load_inline, the way
many KernelBench solutions build theirs (it needs the standard library and Python.h as the worker's
user: sandbox's stdlib copy when Python lives where nobody may enter)."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor rmsnorm(torch::Tensor x, torch::Tensor w, double eps) {
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>(); const float* wp = w.data_ptr<float>(); float* yp = y.data_ptr<float>();
  long rows = x.size(0), cols = x.size(1);
  for (long r = 0; r < rows; ++r) {
    double acc = 0; for (long c = 0; c < cols; ++c) acc += xp[r * cols + c] * xp[r * cols + c];
    float inv = 1.0f / std::sqrt(float(acc / cols) + float(eps));
    for (long c = 0; c < cols; ++c) yp[r * cols + c] = wp[c] * (xp[r * cols + c] * inv);
  }
  return y;
}
"""
ext = load_inline("forgebench_rmsnorm_inline", cpp_sources=SOURCE, functions=["rmsnorm"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        return ext.rmsnorm(x.contiguous(), self.weight, self.eps)
