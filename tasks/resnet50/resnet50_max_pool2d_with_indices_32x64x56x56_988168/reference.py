"""aten.max_pool2d_with_indices from resnet50 at its captured shapes: [32, 64, 112, 112] float16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.max_pool2d_with_indices.default exactly as resnet50 calls it (1 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0):
        out = torch.ops.aten.max_pool2d_with_indices.default(x0, [3, 3], [2, 2], [1, 1])
        return out[0], out[1]


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
        draw([32, 64, 112, 112], torch.float16, low=0, high=1.82422, mean=0.121117, std=0.1778),
    ]


def get_init_inputs():
    return []
