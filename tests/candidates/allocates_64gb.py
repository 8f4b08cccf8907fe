"""Plants a memory blow-up: forward fills a 64 GiB tensor."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        scratch = torch.ones(64 * 2**30, dtype=torch.uint8)
        return x + scratch[: x.numel()].reshape(x.shape)
