"""A fused region of qwen35: mul -> _to_copy, at its captured shapes ([256, 128] bfloat16, [256, 128] float32). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """2 calls qwen35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        t0 = torch.ops.aten.mul.Tensor(x0, x1)
        t1 = torch.ops.aten._to_copy.default(t0, dtype=torch.bfloat16)
        return t1


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
        draw([256, 128], torch.bfloat16, low=-1.55469, high=1.75, mean=0.00096566, std=0.112055),
        draw([256, 128], torch.float32, low=-0.278464, high=4.677, mean=0.305347, std=0.730434),
    ]


def get_init_inputs():
    return []
