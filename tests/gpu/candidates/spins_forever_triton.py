"""Plants a GPU hang written in Triton: a program loops on a flag nobody sets."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def spin(flag_ptr):
    while tl.load(flag_ptr, volatile=True) == 0:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        spin[(1,)](flag)
        torch.cuda.synchronize()
        return torch.empty_like(x)
