"""Plants an early exit: forward calls os._exit(0), a clean status with no result written."""

import os

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        os._exit(0)
