"""aten.relu from resnet50 at its captured shapes: [32, 256, 56, 56] float16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.relu.default exactly as resnet50 calls it (3 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0):
        return torch.ops.aten.relu.default(x0)


def draw(shape, dtype, low=-1.0, high=1.0, mean=0.0, std=1.0, stride=None):
    """A tensor of `shape` and `dtype` whose values look like the captured ones: integers uniform in
    [low, high] (so indices stay in range), booleans true with probability `mean`, floats normal
    with `mean` and `std` clipped to [low, high] (so inputs that were positive stay positive).
    With `stride`, the tensor is a strided view of a fresh buffer, laid out as the model's was."""
    size = list(shape)
    if stride is not None:
        size = [1 + sum((n - 1) * s for n, s in zip(shape, stride))] if all(shape) else [0]
    if dtype == torch.bool:
        values = torch.rand(size) < mean
    elif dtype.is_floating_point:
        values = (torch.randn(size) * std + mean).clamp(low, high).to(dtype)
    else:
        values = torch.randint(int(low), int(high) + 1, size, dtype=dtype)
    return values if stride is None else values.as_strided(shape, stride)


def get_inputs():
    return [
        draw([32, 256, 56, 56], torch.float16, low=-1.75781, high=1.67969, mean=0.0413164, std=0.414441),
    ]


def get_init_inputs():
    return []
