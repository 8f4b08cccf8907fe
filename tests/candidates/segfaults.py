"""Plants a segfault: forward writes to address 0 (ctypes.memset on a null pointer)."""

import ctypes

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        ctypes.memset(0, 0, 16)
        return x
