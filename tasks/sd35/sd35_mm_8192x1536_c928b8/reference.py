"""aten.mm from sd35 at its captured shapes: [8192, 1536] bfloat16, [1536, 1536] bfloat16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.mm.default exactly as sd35 calls it (960 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        return torch.ops.aten.mm.default(x0, x1)


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
        draw([8192, 1536], torch.bfloat16, low=-1.14844, high=1.1875, mean=0.00212128, std=0.337415),
        draw([1536, 1536], torch.bfloat16, low=-0.0255127, high=0.0255127, mean=-1.95471e-06, std=0.0147267, stride=[1, 1536]),
    ]


def get_init_inputs():
    return []
