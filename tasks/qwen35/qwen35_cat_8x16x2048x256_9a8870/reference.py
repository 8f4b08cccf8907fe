"""aten.cat from qwen35 at its captured shapes: [8, 16, 2048, 64] bfloat16, [8, 16, 2048, 192] bfloat16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.cat.default exactly as qwen35 calls it (8 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        return torch.ops.aten.cat.default([x0, x1], -1)


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
        draw([8, 16, 2048, 64], torch.bfloat16, low=-4.84375, high=4.78125, mean=5.00358e-06, std=1.00043, stride=[2097152, 64, 1024, 1]),
        draw([8, 16, 2048, 192], torch.bfloat16, low=-5, high=4.78125, mean=3.12514e-05, std=0.999639, stride=[8388608, 256, 4096, 1]),
    ]


def get_init_inputs():
    return []
