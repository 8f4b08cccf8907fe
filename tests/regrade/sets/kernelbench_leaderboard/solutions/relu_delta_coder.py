import torch
from torch import nn


class ModelNew(nn.Module):
    # Wrong: a leaky ReLU, not a ReLU.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, 0.5 * x)
