"""A fused region of qwen35: _to_copy -> _to_copy -> pow -> mean -> add -> rsqrt -> mul -> _to_copy -> mul -> _to_copy -> silu -> mul -> _to_copy, at its captured shapes ([8, 2048, 32, 128] float32, [128] bfloat16, [524288, 128] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """13 calls qwen35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2):
        t0 = torch.ops.aten._to_copy.default(x0, dtype=torch.bfloat16, memory_format=torch.contiguous_format)
        t1 = torch.ops.aten._to_copy.default(torch.ops.aten.as_strided.default(t0, [524288, 128], [128, 1], 0), dtype=torch.float32)
        t2 = torch.ops.aten.pow.Tensor_Scalar(t1, 2)
        t3 = torch.ops.aten.mean.dim(t2, [-1], True)
        t4 = torch.ops.aten.add.Tensor(t3, 1e-06)
        t5 = torch.ops.aten.rsqrt.default(t4)
        t6 = torch.ops.aten.mul.Tensor(t1, t5)
        t7 = torch.ops.aten._to_copy.default(t6, dtype=torch.bfloat16)
        t8 = torch.ops.aten.mul.Tensor(x1, t7)
        t9 = torch.ops.aten._to_copy.default(x2, dtype=torch.float32)
        t10 = torch.ops.aten.silu.default(t9)
        t11 = torch.ops.aten.mul.Tensor(t8, t10)
        t12 = torch.ops.aten._to_copy.default(t11, dtype=torch.bfloat16)
        return t12


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
        draw([8, 2048, 32, 128], torch.float32, low=-0.00440746, high=0.00289106, mean=-1.0271e-07, std=0.000113012, stride=[8388608, 128, 262144, 1]),
        draw([128], torch.bfloat16, low=1, high=1, mean=1, std=0),
        draw([524288, 128], torch.bfloat16, low=-0.00439453, high=0.00288391, mean=-1.02893e-07, std=0.000113012),
    ]


def get_init_inputs():
    return []
