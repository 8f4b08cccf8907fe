"""aten._scaled_dot_product_cudnn_attention from sd35 at its captured shapes: [2, 24, 4429, 64] bfloat16, [2, 24, 4429, 64] bfloat16, [2, 24, 4429, 64] bfloat16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten._scaled_dot_product_cudnn_attention.default exactly as sd35 calls it (960 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2):
        out = torch.ops.aten._scaled_dot_product_cudnn_attention.default(x0, x1, x2, None, False)
        return out[0]


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
        draw([2, 24, 4429, 64], torch.bfloat16, low=-5.09375, high=4.78125, mean=-0.014465, std=1.00008),
        draw([2, 24, 4429, 64], torch.bfloat16, low=-4.5625, high=4.40625, mean=0.00182756, std=1.00034),
        draw([2, 24, 4429, 64], torch.bfloat16, low=-3.21875, high=2.79688, mean=-0.000567899, std=0.579397),
    ]


def get_init_inputs():
    return []
