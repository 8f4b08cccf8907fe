"""A user's MLP for `forgebench capture --model tests.cpu_mlp_fixture_model:build` on the CPU (tests/llm):
a linear layer, a LayerNorm whose GELU follows it (a fused norm-and-activation chain), a linear layer
whose residual add is its epilogue, and a linear layer without a bias. All float32."""

import torch
import torch.nn as nn

ROWS, FEATURES, HIDDEN = 48, 96, 160


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(FEATURES, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.down = nn.Linear(HIDDEN, FEATURES)
        self.head = nn.Linear(FEATURES, 40, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.down(nn.functional.gelu(self.norm(self.up(x))))
        return self.head(h)


def build():
    torch.manual_seed(0)
    return MLP(), (torch.randn(2, ROWS // 2, FEATURES),)
