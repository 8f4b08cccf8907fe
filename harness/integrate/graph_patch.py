"""The interposer: a torch.compile backend whose graph pass sends a call to a kept kernel when, and
only when, the call's signature in the traced ATen graph is one the kernel's task was captured at
(signature.py); every other call stays PyTorch's. The patched graph runs as FX code, not through
Inductor. A kernel that raises falls back to the op for that call, and the fallback is counted.

Chosen by measurement (docs/benchmarks.md, ninth session): a dispatch mode sees every ATen call
of the forward from Python, 17.7 us each on the H200's host, which made ResNet-50 2.4x slower with
no kernel in it at all. The graph pass pays nothing per call it leaves alone, and the traced graph
says which of an op's outputs anything reads. Dynamo's guards recompile the graph for inputs of
another shape, dtype or layout, and the pass finds no captured signature there: those calls go to
PyTorch.
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from harness.integrate.signature import TaskCall, describe

aten = torch.ops.aten


@dataclass
class Kernel:
    """A kept kernel in place of its task's call."""

    task_id: str
    call: TaskCall
    module: torch.nn.Module
    n_inputs: int


def kernel_inputs(kernel: Kernel, args: tuple) -> list[Any]:
    """The kernel's forward inputs, taken from the call's tensor arguments (TaskCall.input_positions)."""
    leaves, _ = tree_flatten(list(args))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    inputs: list[Any] = [None] * kernel.n_inputs
    for position, t in zip(kernel.call.input_positions, tensors):
        inputs[position] = t
    return inputs


def _batch_norm_in_eval(args: tuple) -> tuple:
    x, weight, bias, mean, var, momentum, eps = args
    return (x, weight, bias, mean, var, False, momentum, eps)


# Ops a traced graph holds in another spelling than eager dispatches them, and how a call in the
# graph's spelling reads in the captured one.
_CAPTURED_AS = {
    aten._native_batch_norm_legit_no_training.default: (aten.native_batch_norm.default, _batch_norm_in_eval),
}


def captured_form(op, args: tuple) -> tuple[Any, tuple]:
    if op in _CAPTURED_AS:
        twin, convert = _CAPTURED_AS[op]
        return twin, convert(tuple(args))
    return op, tuple(args)


def _meta(value: Any) -> Any:
    """A graph node's arguments with each node replaced by its traced value (a fake tensor)."""
    return tree_map(lambda v: v.meta.get("val", v) if isinstance(v, torch.fx.Node) else v, value)


def _reads_only(node: torch.fx.Node, index: int, outputs: int) -> bool:
    """Whether the graph reads no output of a multi-output call but `index` (batch norm's saved
    statistics are returned, and read by nothing in inference)."""
    if outputs == 1:
        return True
    return all(u.target is operator.getitem and u.args[1] == index for u in node.users)


class Patch:
    """The backend and its counts: calls each kernel ran, fallbacks after it raised, and how many
    graph calls of the kernels' ops it left alone because their signature was not captured."""

    def __init__(self, kernels: list[Kernel]):
        self.by_signature = {k.call.signature: k for k in kernels}
        self.ops = {k.call.op for k in kernels}
        self.hits: Counter = Counter()
        self.fallbacks: Counter = Counter()
        self.errors: dict[str, str] = {}
        self.graph_calls = 0  # ATen calls in the traced graphs
        self.replaced = 0  # of those, sent to a kernel
        self.unmatched = 0  # calls of a kernel's op at a signature no kernel has

    def compile(self, model: torch.nn.Module):
        from torch._dynamo.backends.common import aot_autograd

        return torch.compile(model, backend=aot_autograd(fw_compiler=self._pass), dynamic=False)

    def _pass(self, gm: torch.fx.GraphModule, example_inputs) -> torch.fx.GraphModule:
        for node in list(gm.graph.nodes):
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            self.graph_calls += 1
            op, args = captured_form(node.target, node.args)
            if op not in self.ops:
                continue
            signature = (str(op), describe(_meta(args)), describe(tuple(sorted(_meta(dict(node.kwargs)).items()))))
            kernel = self.by_signature.get(signature)
            if kernel is None or not _reads_only(node, kernel.call.output_index, len(kernel.call.empty_outputs)):
                self.unmatched += 1
                continue
            node.target = self._replacement(kernel, node.target)
            self.replaced += 1
        gm.graph.lint()
        gm.recompile()
        return gm

    def _replacement(self, kernel: Kernel, op):
        """What the graph calls instead of `op`: the kernel, or the op again if the kernel raises."""
        outputs = len(kernel.call.empty_outputs)

        def forgebench_kernel(*args, **kwargs):
            try:
                result = kernel.module(*kernel_inputs(kernel, captured_form(op, args)[1]))
                if not isinstance(result, torch.Tensor):
                    raise TypeError(f"the kernel returned {type(result).__name__}, not a tensor")
            except Exception as exc:  # the guard's run-time half: PyTorch answers instead
                self.fallbacks[kernel.task_id] += 1
                self.errors.setdefault(kernel.task_id, f"{type(exc).__name__}: {exc}"[:300])
                return op(*args, **kwargs)
            self.hits[kernel.task_id] += 1
            if outputs == 1:
                return result
            # Only this output is read (_reads_only); the others' places hold nothing.
            return tuple(result if i == kernel.call.output_index else None for i in range(outputs))

        forgebench_kernel.__name__ = forgebench_kernel.__qualname__ = f"forgebench_kernel_{self.replaced}"
        return forgebench_kernel
