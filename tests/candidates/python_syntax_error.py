"""Plants a Python syntax error (an unclosed parenthesis)."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x:
        return x
