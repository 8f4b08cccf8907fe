"""aten._scaled_dot_product_efficient_attention from gemma4 at its captured shapes: [8, 32, 2048, 512] bfloat16, [8, 32, 2048, 512] bfloat16, [8, 32, 2048, 512] bfloat16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten._scaled_dot_product_efficient_attention.default exactly as gemma4 calls it (10 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2):
        out = torch.ops.aten._scaled_dot_product_efficient_attention.default(x0, x1, x2, None, False, 0.0, True, scale=1.0)
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
        draw([8, 32, 2048, 512], torch.bfloat16, low=-4.8125, high=5.375, mean=0.0014416, std=0.99895, stride=[33554432, 512, 16384, 1]),
        draw([8, 32, 2048, 512], torch.bfloat16, low=-4.625, high=4.84375, mean=-0.00232334, std=1.0007),
        draw([8, 32, 2048, 512], torch.bfloat16, low=-4.625, high=4.84375, mean=-0.00257088, std=1.00074),
    ]


def get_init_inputs():
    return []
