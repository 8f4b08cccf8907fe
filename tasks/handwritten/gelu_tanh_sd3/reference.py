import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GELU (tanh approximation) on an SD3 transformer MLP activation (tokens x 4*hidden)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


tokens, width = 1024, 6144


def get_inputs():
    return [torch.randn(tokens, width)]


def get_init_inputs():
    return []
