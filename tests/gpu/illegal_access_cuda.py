# approach: planted fault: writes far outside its output (an illegal memory access kills the CUDA context)
import torch
import torch.nn as nn

from harness.platforms.cuda import compile_cuda

kernel = compile_cuda(
    r"""
extern "C" __global__ void bad(float* y) { y[(long)1 << 40] = 1.0f; }
""",
    "bad",
)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernel(grid=(1, 1, 1), block=(1, 1, 1), args=[y])
        torch.cuda.synchronize()
        return y
