"""A fused region of qwen35: add -> _to_copy -> pow -> mean -> add -> rsqrt -> mul -> _to_copy -> add -> mul -> _to_copy, at its captured shapes ([8, 2048, 4096] bfloat16, [8, 2048, 4096] bfloat16, [4096] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """11 calls qwen35 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2):
        t0 = torch.ops.aten.add.Tensor(x0, x1)
        t1 = torch.ops.aten._to_copy.default(t0, dtype=torch.float32)
        t2 = torch.ops.aten.pow.Tensor_Scalar(t1, 2)
        t3 = torch.ops.aten.mean.dim(t2, [-1], True)
        t4 = torch.ops.aten.add.Tensor(t3, 1e-06)
        t5 = torch.ops.aten.rsqrt.default(t4)
        t6 = torch.ops.aten.mul.Tensor(t1, t5)
        t7 = torch.ops.aten._to_copy.default(x2, dtype=torch.float32)
        t8 = torch.ops.aten.add.Tensor(t7, 1.0)
        t9 = torch.ops.aten.mul.Tensor(t6, t8)
        t10 = torch.ops.aten._to_copy.default(t9, device=x0.device, dtype=torch.bfloat16, layout=torch.strided)
        return t10


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
        draw([8, 2048, 4096], torch.bfloat16, low=-0.103516, high=0.104492, mean=8.5388e-06, std=0.0199901),
        draw([8, 2048, 4096], torch.bfloat16, low=-0.796875, high=0.742188, mean=9.66181e-05, std=0.112859),
        draw([4096], torch.bfloat16, low=0, high=0, mean=0, std=0),
    ]


def get_init_inputs():
    return []
