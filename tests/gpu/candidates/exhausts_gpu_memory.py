"""Plants a GPU memory blow-up: forward allocates tensors until the device has no memory left."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        hoard = []
        while True:
            hoard.append(torch.empty(8 * 2**30, dtype=torch.uint8, device=x.device))
