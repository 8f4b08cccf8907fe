import torch
import torch.nn as nn


class Model(nn.Module):
    """RMSNorm with weight in bf16 as Qwen's modelling code writes it (upcast to fp32 inside)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).bfloat16())
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


tokens, hidden = 16384, 4096


def get_inputs():
    return [torch.randn(tokens, hidden).bfloat16()]


def get_init_inputs():
    return [hidden, 1e-6]
