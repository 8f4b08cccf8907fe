"""aten.convolution from qwen35 at its captured shapes: [8, 8192, 5] bfloat16, [8192, 1, 4] bfloat16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.convolution.default exactly as qwen35 calls it (192 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        return torch.ops.aten.convolution.default(x0, x1, None, [1], [0], [1], False, [0], 8192)


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
        draw([8, 8192, 5], torch.bfloat16, low=-6.03125, high=5.90625, mean=0.000932546, std=1.28069),
        draw([8192, 1, 4], torch.bfloat16, low=-0.0825195, high=0.0874023, mean=-0.000180802, std=0.0200155),
    ]


def get_init_inputs():
    return []
