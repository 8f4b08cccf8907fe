"""A fused region of sd35: addmm -> mul -> add, at its captured shapes ([1536] bfloat16, [8192, 1536] bfloat16, [1536, 1536] bfloat16, [2, 1, 1536] bfloat16, [2, 4096, 1536] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """3 calls sd35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2, x3, x4):
        t0 = torch.ops.aten.addmm.default(x0, x1, x2)
        t1 = torch.ops.aten.mul.Tensor(x3, torch.ops.aten.as_strided.default(t0, [2, 4096, 1536], [6291456, 1536, 1], 0))
        t2 = torch.ops.aten.add.Tensor(x4, t1)
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
        draw([1536], torch.bfloat16, low=-0.0255127, high=0.0253906, mean=-0.000272433, std=0.0149437),
        draw([8192, 1536], torch.bfloat16, low=-4.8125, high=5.125, mean=0.000452281, std=0.99999),
        draw([1536, 1536], torch.bfloat16, low=-0.0255127, high=0.0255127, mean=7.56384e-06, std=0.0147331, stride=[1, 1536]),
        draw([2, 1, 1536], torch.bfloat16, low=-0.255859, high=0.285156, mean=0.000302405, std=0.0678512, stride=[13824, 1536, 1]),
        draw([2, 4096, 1536], torch.bfloat16, low=-3.46875, high=4.1875, mean=0.367068, std=0.835983),
    ]


def get_init_inputs():
    return []
