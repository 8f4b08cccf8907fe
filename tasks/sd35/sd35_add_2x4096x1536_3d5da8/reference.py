"""aten.add from sd35 at its captured shapes: [2, 4096, 1536] bfloat16, [2, 1, 1536] bfloat16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.add.Tensor exactly as sd35 calls it (880 calls with these arguments)."""

    def __init__(self):
        super().__init__()

    def forward(self, x0, x1):
        return torch.ops.aten.add.Tensor(x0, x1)


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
        draw([2, 4096, 1536], torch.bfloat16, low=-4.71875, high=5.4375, mean=-0.00380996, std=1.00237),
        draw([2, 1, 1536], torch.bfloat16, low=-0.253906, high=0.224609, mean=-0.000230358, std=0.0674022, stride=[9216, 1536, 1]),
    ]


def get_init_inputs():
    return []
