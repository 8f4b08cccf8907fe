import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SwiGLU gate: silu(gate) * up, from a Qwen/Gemma MLP whose fused projection is split in half."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


tokens, intermediate = 16, 4864


def get_inputs():
    return [torch.randn(tokens, 2 * intermediate)]


def get_init_inputs():
    return []
