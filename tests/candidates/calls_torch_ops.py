"""Plants PyTorch doing the work: forward is the reference's own torch ops (pow, mean, rsqrt)."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))
