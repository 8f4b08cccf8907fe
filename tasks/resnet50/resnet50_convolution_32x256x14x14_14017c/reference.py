"""aten.convolution from resnet50 at its captured shapes: [32, 1024, 14, 14] float16, [256, 1024, 1, 1] float16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.convolution.default exactly as resnet50 calls it (5 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        return torch.ops.aten.convolution.default(x0, x1, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


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
        draw([32, 1024, 14, 14], torch.float16, low=0, high=17.9844, mean=1.73909, std=2.60033),
        draw([256, 1024, 1, 1], torch.float16, low=-0.407227, high=0.44458, mean=-0.000168553, std=0.0884235),
    ]


def get_init_inputs():
    return []
