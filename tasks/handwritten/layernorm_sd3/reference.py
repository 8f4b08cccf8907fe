import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LayerNorm with weight and bias over an SD3 transformer hidden state (tokens x 1536)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


tokens, hidden = 4096, 1536


def get_inputs():
    return [torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden, 1e-6]
