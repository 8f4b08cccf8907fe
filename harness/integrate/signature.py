"""What a task's calls look like to the interposer. A task's reference (harness/capture/emit.py)
makes the calls it was captured from: one op, or a chain of them in which each reads an earlier
one's result. Run once under a recorder, it gives `TaskCall`: every step's op and arguments, each
tensor argument either one of forward's inputs (by its shape, dtype, strides and device) or an
earlier step's output, every other argument by value, and which steps' outputs forward returns (one,
or several: a residual sum beside its norm). The graph pass (graph_patch.py) replaces a subgraph only
where it matches all of that; any other call stays PyTorch's.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from harness.capture.record import TensorSpec


def describe(value: Any) -> Any:
    """A hashable description of one argument: tensors by layout, never by value."""
    if isinstance(value, torch.Tensor):
        return (TensorSpec.of(value), value.device.type)  # capture's own layout of a tensor argument
    if isinstance(value, (list, tuple)):
        return tuple(describe(v) for v in value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return (type(value).__name__, value)  # 2, 2.0 and True are equal, and give other dtypes
    return str(value)  # dtypes, devices, memory formats, layouts


@dataclass(frozen=True)
class Input:
    """A tensor argument that is forward's input `index`, as `layout` describes it."""

    index: int
    layout: tuple


@dataclass(frozen=True)
class Step:
    """A tensor argument that is output `output` of the chain's step `step`."""

    step: int
    output: int


@dataclass
class TaskCall:
    """The task's calls: steps of (op, args, kwargs) whose tensors are Input or Step, the rest
    values; the steps' outputs forward returns (a tuple of them when there are several), and how
    many outputs each step's op has."""

    steps: list[tuple[Any, tuple, dict]]
    n_inputs: int
    outputs: list[Step]
    outputs_per_step: list[int]

    @property
    def final(self) -> int:
        """The latest step whose result forward returns: where the graph pass starts matching."""
        return max(out.step for out in self.outputs)

    @property
    def anchor(self):
        """The op of the final step."""
        return self.steps[self.final][0]

    @property
    def multi(self) -> bool:
        """Whether forward returns a tuple of several results (the kernel's op then returns as many)."""
        return len(self.outputs) > 1

    def returned(self, step: int) -> set[int]:
        """Which outputs of a step forward returns (none for a step inside the chain)."""
        return {out.output for out in self.outputs if out.step == step}

    def replay(self, inputs: list[Any]) -> Any:
        """The task's own calls on these inputs: the answer a kernel replaces (a tuple when several)."""
        results: list[list[Any]] = []
        for op, args, kwargs in self.steps:
            args, kwargs = _filled(args, kwargs, inputs, results)
            results.append(tree_flatten(op(*args, **kwargs))[0])
        returned = [results[out.step][out.output] for out in self.outputs]
        return tuple(returned) if self.multi else returned[0]

    def module(self) -> torch.fx.GraphModule | None:
        """The task's calls as FX code, each step one direct ATen call, as eager makes it: what the
        guard times a kernel against in place (replay rebuilds every step's arguments in Python,
        about 12 us a step, which would count as the op's). None where a step returns a list."""
        graph = torch.fx.Graph()
        inputs = [graph.placeholder(f"x{i}") for i in range(self.n_inputs)]
        results: list[list[Any]] = []
        for op, args, kwargs in self.steps:
            returns = [str(r.type) for r in op._schema.returns]
            if any(r != "Tensor" for r in returns):
                return None
            node = graph.call_function(op, *_filled(args, kwargs, inputs, results))
            outputs = range(len(returns)) if len(returns) > 1 else []
            results.append([graph.call_function(operator.getitem, (node, k)) for k in outputs] or [node])
        returned = [results[out.step][out.output] for out in self.outputs]
        graph.output(tuple(returned) if self.multi else returned[0])
        return torch.fx.GraphModule(torch.nn.Module(), graph)


def _filled(args: tuple, kwargs: dict, inputs: list[Any], results: list[list[Any]]) -> tuple[tuple, dict]:
    """A step's arguments with its Input and Step slots filled from the inputs and earlier results."""

    def fill(v):
        if isinstance(v, Input):
            return inputs[v.index]
        if isinstance(v, Step):
            return results[v.step][v.output]
        return v

    return tree_map(fill, args, is_leaf=_is_slot), tree_map(fill, kwargs, is_leaf=_is_slot)


def _is_slot(value: Any) -> bool:
    return isinstance(value, (Input, Step))


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((func, args, kwargs, out))
        return out


class NotIntegrable(ValueError):
    """The task cannot stand in for a model's calls; the sentence says why."""


def task_call(reference, inputs: list[Any]) -> TaskCall:
    """Run the task's Model once under a recorder: its calls, with their tensors traced to
    forward's inputs or to earlier calls' outputs."""
    model = reference.Model(*reference.get_init_inputs())
    recorder = _Recorder()
    with torch.no_grad(), recorder:
        returned = model(*inputs)
    calls = [c for c in recorder.calls if c[0] is not torch.ops.aten.detach.default]
    if not calls:
        raise NotIntegrable("its reference makes no ATen call")
    produced: dict[int, Step] = {}
    used: set[int] = set()
    steps, counts = [], []

    def slot(value):
        if not isinstance(value, torch.Tensor):
            return value
        if id(value) in produced:
            return produced[id(value)]
        found = [i for i, x in enumerate(inputs) if x is value]
        if not found:
            raise NotIntegrable("a tensor its calls read is neither an input of forward nor an earlier call's output")
        used.add(found[0])
        return Input(found[0], describe(value))

    for j, (func, args, kwargs, out) in enumerate(calls):
        steps.append((func, tree_map(slot, tuple(args)), tree_map(slot, dict(kwargs))))
        outs = tree_flatten(out)[0]
        counts.append(len(outs))
        for k, t in enumerate(outs):
            if isinstance(t, torch.Tensor):
                produced.setdefault(id(t), Step(j, k))
    if used != set(range(len(inputs))):
        raise NotIntegrable("forward has inputs its calls never read")
    results = list(returned) if isinstance(returned, tuple) else [returned]
    outputs = [produced.get(id(r)) if isinstance(r, torch.Tensor) else None for r in results]
    if not outputs or None in outputs:
        raise NotIntegrable("forward does not return its calls' outputs as they are")
    if len(set(outputs)) != len(outputs):
        raise NotIntegrable("forward returns one of its calls' outputs twice")
    return TaskCall(steps, len(inputs), outputs, counts)
