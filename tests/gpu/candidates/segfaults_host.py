"""Plants a segfault in a GPU worker: forward launches nothing and writes to host address 0."""

import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.memset(0, 0, 16)
        return x
