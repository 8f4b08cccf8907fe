"""A small model for `forgebench e2e` on the CPU (tests/integrate): a ReLU whose input is positive
but for one outlier (so a kernel that assumes positive inputs is right on the task's random inputs
and wrong on the model's own), a linear layer, and erfinv in bf16, which ATen runs slowly on the
CPU (a kernel computing it in fp32 is an order of magnitude faster), then a sigmoid."""

import torch
import torch.nn as nn

ROWS, FEATURES = 64, 256


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(FEATURES, FEATURES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.proj(torch.relu(x))
        q = torch.erfinv(torch.tanh(h).to(torch.bfloat16))
        return torch.sigmoid(q.float())


def inputs(rows: int = ROWS) -> torch.Tensor:
    torch.manual_seed(1)
    x = torch.randn(rows, FEATURES) * 0.1 + 1.0
    x[0, 0] = -4.0  # one outlier below zero, as real activations have and the task's draw does not
    return x


def build():
    torch.manual_seed(0)
    return Net(), (inputs(),)
