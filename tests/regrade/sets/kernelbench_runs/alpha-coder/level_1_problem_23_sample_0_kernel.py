import torch
from torch import nn


class ModelNew(nn.Module):
    # Wrong: normalises over the batch, not over each row.
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=0)
