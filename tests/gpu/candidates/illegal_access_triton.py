"""Plants an illegal memory access from Triton: a store a terabyte past the output."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bad(y_ptr):
    tl.store(y_ptr + (1 << 40), 1.0)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        bad[(1,)](y)
        torch.cuda.synchronize()
        return y
