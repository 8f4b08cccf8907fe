"""A fused region of gemma4: mul -> _to_copy -> mul -> _to_copy, at its captured shapes ([8, 1, 5376] float32, [8, 1, 1] float32, [5376] bfloat16). It returns the region's last result only."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """4 calls gemma4 makes in a row, each reading an earlier one's result."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1, x2):
        t0 = torch.ops.aten.mul.Tensor(x0, x1)
        t1 = torch.ops.aten._to_copy.default(x2, dtype=torch.float32)
        t2 = torch.ops.aten.mul.Tensor(t0, t1)
        t3 = torch.ops.aten._to_copy.default(t2, device=x0.device, dtype=torch.bfloat16, layout=torch.strided)
        return t3


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
        draw([8, 1, 5376], torch.float32, low=-5.75, high=6.25, mean=0.00398008, std=1.46979),
        draw([8, 1, 1], torch.float32, low=0.67251, high=0.690188, mean=0.680448, std=0.006259),
        draw([5376], torch.bfloat16, low=1, high=1, mean=1, std=0),
    ]


def get_init_inputs():
    return []
