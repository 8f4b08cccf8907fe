"""What a call to an ATen op looks like to the interposer: its op, the shape, dtype, strides and
device of every tensor argument, and the value of every other argument. A kernel is used only at
a signature its task was captured with; a call at any other goes to PyTorch.

A task's reference (harness/capture/emit.py) makes exactly the call it was captured from, its
tensors in the order of forward's inputs, so running it once under a recorder gives the signature
and how the call's arguments map to the kernel's inputs (TaskCall).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def describe(value: Any) -> Any:
    """A hashable description of one argument: tensors by layout, never by value."""
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), tuple(value.stride()), value.device.type)
    if isinstance(value, (list, tuple)):
        return tuple(describe(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # dtypes, devices, memory formats, layouts


def of_call(func, args: tuple, kwargs: dict) -> tuple:
    return (str(func), describe(args), describe(tuple(sorted(kwargs.items()))))


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((func, args, kwargs, out))
        return out


@dataclass
class TaskCall:
    """The one call a single-op task reproduces: its op and signature, which of the call's tensor
    arguments (flattened, in order) is each of forward's inputs, which of the op's outputs
    (flattened) forward returns, and the op's output structure for the rest."""

    op: Any  # the OpOverload
    signature: tuple
    input_positions: list[int]
    output_index: int
    output_spec: Any  # the op's output structure (a pytree spec)
    # (shape, dtype) of each output forward does not return, all empty (batch norm's saved
    # statistics in eval), made anew on each call; None in the returned one's place.
    empty_outputs: list[tuple[tuple[int, ...], torch.dtype] | None]


class NotIntegrable(ValueError):
    """The task cannot stand in for a model call; the sentence says why."""


def task_call(reference, inputs: list[Any]) -> TaskCall:
    """Run the task's Model once under a recorder: its single ATen call, mapped to forward's inputs."""
    model = reference.Model(*reference.get_init_inputs())
    recorder = _Recorder()
    with torch.no_grad(), recorder:
        returned = model(*inputs)
    calls = [c for c in recorder.calls if c[0] is not torch.ops.aten.detach.default]
    if len(calls) != 1:
        raise NotIntegrable(
            f"its reference makes {len(calls)} ATen calls; the interposer replaces single calls "
            "(a fused chain needs a graph pass, not built yet)"
        )
    func, args, kwargs, out = calls[0]
    if kwargs:
        raise NotIntegrable("its call takes keyword tensor arguments, which the interposer does not map")
    leaves, _ = tree_flatten(list(args))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    positions = []
    for t in tensors:
        found = [i for i, x in enumerate(inputs) if x is t]
        if not found:
            raise NotIntegrable("an argument of its call is not one of forward's inputs")
        positions.append(found[0])
    if sorted(set(positions)) != list(range(len(inputs))):
        raise NotIntegrable("forward's inputs are not exactly its call's tensor arguments")
    outs, spec = tree_flatten(out)
    picked = [i for i, t in enumerate(outs) if t is returned]
    if not picked:
        raise NotIntegrable("forward does not return one of its call's outputs as it is")
    empty: list = []
    for i, t in enumerate(outs):
        if i == picked[0]:
            empty.append(None)
        elif isinstance(t, torch.Tensor) and t.numel() == 0:
            empty.append((tuple(t.shape), t.dtype))
        else:
            raise NotIntegrable("the op has outputs besides the one its task returns, which the model may read")
    return TaskCall(func, of_call(func, args, kwargs), positions, picked[0], spec, empty)
