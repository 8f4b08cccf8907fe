"""A fused region of qwen35: sub -> exp -> mul, at its captured shapes ([8, 32, 32, 1] float32, [8, 32, 32, 64] float32, [8, 32, 32, 64, 128] float32). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """3 calls qwen35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2):
        t0 = torch.ops.aten.sub.Tensor(x0, x1)
        t1 = torch.ops.aten.exp.default(t0)
        t2 = torch.ops.aten.mul.Tensor(x2, torch.ops.aten.as_strided.default(t1, [8, 32, 32, 64, 1], [65536, 2048, 64, 1, 1], 0))
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
        draw([8, 32, 32, 1], torch.float32, low=-1716.75, high=-19.8678, mean=-878.595, std=409.139, stride=[65536, 2048, 64, 1]),
        draw([8, 32, 32, 64], torch.float32, low=-1716.75, high=-0.0229071, mean=-446.284, std=350.017),
        draw([8, 32, 32, 64, 128], torch.float32, low=-0.444768, high=0.56265, mean=0.00112049, std=0.0498281),
    ]


def get_init_inputs():
    return []
