"""The interposer: a dispatch mode that sends an ATen call to a kept kernel when, and only when,
its signature is one the kernel's task was captured at (signature.py), and every other call to
PyTorch. A kernel that raises falls back to PyTorch for that call, and the fallback is counted.

A dispatch mode sees every ATen call of the forward, so its cost is paid on all of them, not just
the replaced ones: `forgebench e2e` measures it (an interposer with no kernel) and reports it per
call beside the kernels' gains.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from harness.integrate.signature import TaskCall, of_call


@dataclass
class Kernel:
    """A kept kernel in place of its task's call."""

    task_id: str
    call: TaskCall
    module: torch.nn.Module
    n_inputs: int


class Interposer(TorchDispatchMode):
    def __init__(self, kernels: list[Kernel] | None = None, watch: list[TaskCall] | None = None):
        """`kernels` replace their calls; `watch` are signatures to count without replacing (the
        overhead measurement, and calls never seen)."""
        super().__init__()
        self.by_signature = {k.call.signature: k for k in kernels or []}
        watched = [k.call for k in kernels or []] + list(watch or [])
        self.ops = {c.op for c in watched}
        self.hits: Counter = Counter()  # task id -> calls its kernel ran
        self.fallbacks: Counter = Counter()  # task id -> calls that went to PyTorch after its kernel raised
        self.errors: dict[str, str] = {}
        self.op_calls = 0  # calls to a watched op, at any signature
        self.unmatched = 0  # of those, calls at a signature no kernel has

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in self.ops:
            return func(*args, **kwargs)
        self.op_calls += 1
        kernel = self.by_signature.get(of_call(func, args, kwargs))
        if kernel is None:
            self.unmatched += 1
            return func(*args, **kwargs)
        try:
            out = self._run(kernel, func, args, kwargs)
        except Exception as exc:  # the guard's run-time half: PyTorch answers instead
            self.fallbacks[kernel.task_id] += 1
            self.errors.setdefault(kernel.task_id, f"{type(exc).__name__}: {exc}"[:300])
            return func(*args, **kwargs)
        self.hits[kernel.task_id] += 1
        return out

    def _run(self, kernel: Kernel, func, args: tuple, kwargs: dict) -> Any:
        with torch.utils._python_dispatch._disable_current_modes():
            result = kernel.module(*kernel_inputs(kernel, args))
        return assemble(kernel.call, result)


def kernel_inputs(kernel: Kernel, args: tuple) -> list[Any]:
    """The kernel's forward inputs, taken from the call's tensor arguments (TaskCall.input_positions)."""
    leaves, _ = tree_flatten(list(args))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    inputs: list[Any] = [None] * kernel.n_inputs
    for position, t in zip(kernel.call.input_positions, tensors):
        inputs[position] = t
    return inputs


def assemble(call: TaskCall, result: Any) -> Any:
    """The op's whole output with the kernel's result where forward returns it; its other outputs
    (empty, as batch norm's saved statistics in eval) made anew at their captured shapes."""
    if not isinstance(result, torch.Tensor):
        raise TypeError(f"the kernel returned {type(result).__name__}, not a tensor")
    leaves = [
        result if empty is None else torch.empty(empty[0], dtype=empty[1], device=result.device)
        for empty in call.empty_outputs
    ]
    return tree_unflatten(leaves, call.output_spec)
