"""A correct sigmoid that does its work forty times over: slower in place than ATen's."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x0):
        for _ in range(40):
            y = torch.sigmoid(x0)
        return y
