"""A fused region of qwen35: clone -> sigmoid -> mul, at its captured shapes ([8, 2048, 16, 256] bfloat16, [8, 2048, 4096] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """3 calls qwen35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        t0 = torch.ops.aten.clone.default(x0, memory_format=torch.contiguous_format)
        t1 = torch.ops.aten.sigmoid.default(x1)
        t2 = torch.ops.aten.mul.Tensor(torch.ops.aten.as_strided.default(t0, [8, 2048, 4096], [8388608, 4096, 1], 0), t1)
        return t2


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
        draw([8, 2048, 16, 256], torch.bfloat16, low=-3.4375, high=3.625, mean=-0.00385293, std=0.11955, stride=[8388608, 256, 524288, 1]),
        draw([8, 2048, 4096], torch.bfloat16, low=-6.9375, high=6.46875, mean=-0.000774656, std=1.27937),
    ]


def get_init_inputs():
    return []
