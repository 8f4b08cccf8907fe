"""A fused region of qwen35: copy -> sigmoid -> _to_copy -> exp -> neg -> _to_copy -> add -> softplus -> mul -> _to_copy -> exp -> mul -> mul -> sum -> sub -> mul, at its captured shapes ([8, 32, 128, 128] float32, [8, 32, 128, 128] float32, [8, 1, 32] bfloat16, [32] bfloat16, [8, 1, 32] bfloat16, [32] bfloat16, [8, 32, 128, 1] float32, [8, 32, 128] float32). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """16 calls qwen35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2, x3, x4, x5, x6, x7):
        t0 = torch.ops.aten.copy.default(x0, x1)
        t1 = torch.ops.aten.sigmoid.default(x2)
        t2 = torch.ops.aten._to_copy.default(x3, dtype=torch.float32)
        t3 = torch.ops.aten.exp.default(t2)
        t4 = torch.ops.aten.neg.default(t3)
        t5 = torch.ops.aten._to_copy.default(x4, dtype=torch.float32)
        t6 = torch.ops.aten.add.Tensor(t5, x5)
        t7 = torch.ops.aten.softplus.default(t6)
        t8 = torch.ops.aten.mul.Tensor(t4, t7)
        t9 = torch.ops.aten._to_copy.default(torch.ops.aten.as_strided.default(t1, [8, 32, 1], [32, 1, 32], 0), dtype=torch.float32, memory_format=torch.contiguous_format)
        t10 = torch.ops.aten.exp.default(torch.ops.aten.as_strided.default(t8, [8, 32], [32, 1], 0))
        t11 = torch.ops.aten.mul.Tensor(t0, torch.ops.aten.as_strided.default(t10, [8, 32, 1, 1], [32, 1, 1, 1], 0))
        t12 = torch.ops.aten.mul.Tensor(t11, x6)
        t13 = torch.ops.aten.sum.dim_IntList(t12, [-2])
        t14 = torch.ops.aten.sub.Tensor(x7, t13)
        t15 = torch.ops.aten.mul.Tensor(t14, t9)
        return t15


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
        draw([8, 32, 128, 128], torch.float32, low=0, high=0, mean=0, std=0),
        draw([8, 32, 128, 128], torch.float32, low=-0.0416787, high=0.0517258, mean=1.08728e-06, std=0.00127321),
        draw([8, 1, 32], torch.bfloat16, low=-3.1875, high=2.90625, mean=-0.0859365, std=1.22513),
        draw([32], torch.bfloat16, low=-1.32812, high=2.73438, mean=1.98889, std=0.97704),
        draw([8, 1, 32], torch.bfloat16, low=-3.76562, high=3.45312, mean=0.0293579, std=1.38248),
        draw([32], torch.bfloat16, low=1, high=1, mean=1, std=0),
        draw([8, 32, 128, 1], torch.float32, low=-0.401704, high=0.523066, mean=0.00191428, std=0.0883684),
        draw([8, 32, 128], torch.float32, low=-0.124023, high=0.18457, mean=0.000719665, std=0.0255224),
    ]


def get_init_inputs():
    return []
