"""Plants a GPU hang: an NVRTC kernel that spins on a flag nobody sets, so forward never returns."""

import torch
import torch.nn as nn

from harness.platforms.cuda import compile_cuda

kernel = compile_cuda(
    r"""
extern "C" __global__ void spin(volatile int* flag) { while (*flag == 0) { } }
""",
    "spin",
)


class ModelNew(nn.Module):
    def forward(self, x):
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        kernel(grid=(1, 1, 1), block=(1, 1, 1), args=[flag])
        torch.cuda.synchronize()
        return torch.empty_like(x)
