"""aten.add from resnet50 at its captured shapes: [32, 512, 28, 28] float16, [32, 512, 28, 28] float16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """aten.add.Tensor exactly as resnet50 calls it (4 calls with these arguments)."""

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
        draw([32, 512, 28, 28], torch.float16, low=-3.08398, high=4.22656, mean=-0.0216698, std=0.885458),
        draw([32, 512, 28, 28], torch.float16, low=-3.30664, high=3.74219, mean=-0.0525683, std=0.832861),
    ]


def get_init_inputs():
    return []
