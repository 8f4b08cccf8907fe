import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GroupNorm(32) with affine weight and bias, as in the SD VAE decoder's ResNet blocks."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-6):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_channels))
        self.bias = nn.Parameter(0.1 * torch.randn(num_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


batch, channels, height, width = 1, 128, 128, 128


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [32, channels, 1e-6]
