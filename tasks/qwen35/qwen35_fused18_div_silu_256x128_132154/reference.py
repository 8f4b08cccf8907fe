"""A fused region of qwen35: div -> mul -> add -> mul -> sum -> copy -> _to_copy -> copy -> _to_copy -> pow -> mean -> add -> rsqrt -> mul -> _to_copy -> mul -> _to_copy -> silu, at its captured shapes ([8, 32, 1, 128] float32, [8, 32, 128, 1] float32, [8, 32, 1, 128] float32, [8, 32, 128, 128] float32, [8, 32, 128] float32, [8, 32, 128, 128] float32, [128] bfloat16, [256, 128] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """18 calls qwen35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2, x3, x4, x5, x6, x7):
        t0 = torch.ops.aten.div.Tensor(x0, 11.313708498984761)
        t1 = torch.ops.aten.mul.Tensor(x1, x2)
        t2 = torch.ops.aten.add.Tensor(x3, t1)
        t3 = torch.ops.aten.mul.Tensor(t2, torch.ops.aten.as_strided.default(t0, [8, 32, 128, 1], [4096, 128, 1, 1], 0))
        t4 = torch.ops.aten.sum.dim_IntList(t3, [-2])
        t5 = torch.ops.aten.copy.default(x4, t4)
        t6 = torch.ops.aten._to_copy.default(torch.ops.aten.as_strided.default(t5, [8, 1, 32, 128], [4096, 128, 128, 1], 0), dtype=torch.bfloat16)
        t7 = torch.ops.aten.copy.default(x5, t2)
        t8 = torch.ops.aten._to_copy.default(torch.ops.aten.as_strided.default(t6, [256, 128], [128, 1], 0), dtype=torch.float32)
        t9 = torch.ops.aten.pow.Tensor_Scalar(t8, 2)
        t10 = torch.ops.aten.mean.dim(t9, [-1], True)
        t11 = torch.ops.aten.add.Tensor(t10, 1e-06)
        t12 = torch.ops.aten.rsqrt.default(t11)
        t13 = torch.ops.aten.mul.Tensor(t8, t12)
        t14 = torch.ops.aten._to_copy.default(t13, dtype=torch.bfloat16)
        t15 = torch.ops.aten.mul.Tensor(x6, t14)
        t16 = torch.ops.aten._to_copy.default(x7, dtype=torch.float32)
        t17 = torch.ops.aten.silu.default(t16)
        return t17


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
        draw([8, 32, 1, 128], torch.float32, low=-0.49474, high=0.487326, mean=0.00184929, std=0.0883698),
        draw([8, 32, 128, 1], torch.float32, low=-0.420712, high=0.557104, mean=0.00183499, std=0.0883701),
        draw([8, 32, 1, 128], torch.float32, low=-0.104991, high=0.109856, mean=0.000304166, std=0.0144864),
        draw([8, 32, 128, 128], torch.float32, low=0, high=0, mean=0, std=0),
        draw([8, 32, 128], torch.float32, low=0, high=0, mean=0, std=0),
        draw([8, 32, 128, 128], torch.float32, low=0, high=0, mean=0, std=0),
        draw([128], torch.bfloat16, low=1, high=1, mean=1, std=0),
        draw([256, 128], torch.bfloat16, low=-0.00138855, high=0.00131226, mean=2.41054e-07, std=0.000114696),
    ]


def get_init_inputs():
    return []
