"""Plants a hang: forward waits forever (sleeping, so the hang leaves the CPU to the other tests)."""

import time

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        while True:
            time.sleep(0.1)
