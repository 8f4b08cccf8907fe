"""A Triton softmax for rows too wide for registers (KernelBench level 1's 23_Softmax: 4096 rows of
393216 fp32, 6.4 GB): one pass for each row's running max and sum (online softmax), one to write.
Used to time a 6 GB task's turnaround (docs/results.md)."""

import torch
import triton
import triton.language as tl
from torch import nn


@triton.jit
def softmax_wide(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * cols, y_ptr + row * cols
    offsets = tl.arange(0, BLOCK)
    running_max = tl.full([BLOCK], float("-inf"), tl.float32)
    running_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_row + start + offsets, mask=start + offsets < cols, other=float("-inf"))
        new_max = tl.maximum(running_max, x)
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.exp(x - new_max)
        running_max = new_max
    row_max = tl.max(running_max, 0)
    row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), 0)
    for start in range(0, cols, BLOCK):
        mask = start + offsets < cols
        x = tl.load(x_row + start + offsets, mask=mask, other=float("-inf"))
        tl.store(y_row + start + offsets, tl.exp(x - row_max) / row_sum, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        softmax_wide[(rows,)](x, y, cols, BLOCK=4096, num_warps=8)
        return y
