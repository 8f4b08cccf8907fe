"""Plants an exception raised from forward."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        raise ValueError("kernel launch failed: rows must be a multiple of 4096")
