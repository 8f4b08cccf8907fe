"""A fused region of sd35: _to_copy -> pow -> mean -> add -> rsqrt -> mul -> _to_copy -> mul, at its captured shapes ([2, 24, 4096, 64] bfloat16, [64] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """8 calls sd35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        t0 = torch.ops.aten._to_copy.default(x0, dtype=torch.float32)
        t1 = torch.ops.aten.pow.Tensor_Scalar(t0, 2)
        t2 = torch.ops.aten.mean.dim(t1, [-1], True)
        t3 = torch.ops.aten.add.Tensor(t2, 1e-06)
        t4 = torch.ops.aten.rsqrt.default(t3)
        t5 = torch.ops.aten.mul.Tensor(x0, t4)
        t6 = torch.ops.aten._to_copy.default(t5, dtype=torch.bfloat16)
        t7 = torch.ops.aten.mul.Tensor(t6, x1)
        return t7


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
        draw([2, 24, 4096, 64], torch.bfloat16, low=-2.89062, high=3, mean=-0.00942439, std=0.57318, stride=[6291456, 64, 1536, 1]),
        draw([64], torch.bfloat16, low=1, high=1, mean=1, std=0),
    ]


def get_init_inputs():
    return []
