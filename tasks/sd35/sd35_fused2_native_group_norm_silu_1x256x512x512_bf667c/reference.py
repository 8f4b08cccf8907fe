"""A fused region of sd35: native_group_norm -> silu, at its captured shapes ([1, 256, 512, 512] bfloat16, [256] bfloat16, [256] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """2 calls sd35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2):
        t0 = torch.ops.aten.native_group_norm.default(x0, x1, x2, 1, 256, 262144, 32, 1e-06)
        t1 = torch.ops.aten.silu.default(t0[0])
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
        draw([1, 256, 512, 512], torch.bfloat16, low=-1.86719, high=1.89062, mean=0.00868374, std=0.33152),
        draw([256], torch.bfloat16, low=1, high=1, mean=1, std=0),
        draw([256], torch.bfloat16, low=0, high=0, mean=0, std=0),
    ]


def get_init_inputs():
    return []
