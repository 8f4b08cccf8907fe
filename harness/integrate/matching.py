"""Where a task's calls are in a traced ATen graph: a unification of the task's steps (signature.py)
with graph nodes, from a call of its final op back through the dataflow, on values of the captured
shapes, dtypes, strides and devices and the same other arguments; and why a found match cannot be
replaced (a result inside it read elsewhere). The graph pass (graph_patch.py) replaces what it finds."""

from __future__ import annotations

import operator
from typing import Any

import torch

from harness.integrate.signature import Input, Step, TaskCall, describe

aten = torch.ops.aten


def _batch_norm_in_eval(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    x, weight, bias, mean, var, momentum, eps = args
    return (x, weight, bias, mean, var, False, momentum, eps), kwargs


# Ops a traced graph holds in another spelling than eager dispatches them (and the capture
# recorded), and how a call in the graph's spelling reads in the captured one.
CAPTURED_AS = {
    aten._native_batch_norm_legit_no_training.default: (aten.native_batch_norm.default, _batch_norm_in_eval),
}


def captured_form(node: torch.fx.Node) -> tuple[Any, tuple, dict]:
    op, args, kwargs = node.target, tuple(node.args), dict(node.kwargs)
    if op in CAPTURED_AS:
        twin, convert = CAPTURED_AS[op]
        return twin, *convert(args, kwargs)
    return op, args, kwargs


def _layout(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        value = value.meta.get("val")
    return describe(value) if isinstance(value, torch.Tensor) else None


class Match:
    """A unification of a task's steps with graph nodes, and of its inputs with graph values."""

    def __init__(self, call: TaskCall):
        self.call = call
        self.steps: dict[int, torch.fx.Node] = {}
        self.inputs: dict[int, torch.fx.Node] = {}
        self.reads: set[torch.fx.Node] = set()  # getitem nodes inside the match

    def step(self, j: int, node: Any) -> bool:
        if not isinstance(node, torch.fx.Node) or node.op != "call_function":
            return False
        if j in self.steps:
            return self.steps[j] is node
        if node in self.steps.values() or not isinstance(node.target, torch._ops.OpOverload):
            return False
        op, args, kwargs = captured_form(node)
        want_op, want_args, want_kwargs = self.call.steps[j]
        if op is not want_op or set(kwargs) != set(want_kwargs) or len(args) != len(want_args):
            return False
        self.steps[j] = node
        return self.value(want_args, args) and all(self.value(want_kwargs[k], kwargs[k]) for k in want_kwargs)

    def value(self, want: Any, got: Any) -> bool:
        if isinstance(want, Input):
            if _layout(got) != want.layout or not isinstance(got, torch.fx.Node):
                return False
            return self.inputs.setdefault(want.index, got) is got
        if isinstance(want, Step):
            if self.call.outputs_per_step[want.step] > 1:
                if not (
                    isinstance(got, torch.fx.Node) and got.target is operator.getitem and got.args[1] == want.output
                ):
                    return False
                self.reads.add(got)
                got = got.args[0]
            return self.step(want.step, got)
        if isinstance(want, (list, tuple)):
            return isinstance(got, (list, tuple)) and len(want) == len(got) and all(map(self.value, want, got))
        return not isinstance(got, torch.fx.Node) and describe(got) == describe(want)

    def left_open(self) -> str | None:
        """Why the matched calls cannot be replaced, or None: a result inside the match is read by
        a call outside it, or of the final call an output other than the one forward returns is
        read (batch norm's saved statistics are not, in inference)."""
        final = self.steps[self.call.final]
        inside = set(self.steps.values()) | self.reads
        if len(self.steps) != len(self.call.steps) or len(self.inputs) != self.call.n_inputs:
            return "the matched calls do not cover the task"  # not reached: step() unifies them all
        for j, node in self.steps.items():
            readers = set(node.users)
            if node is final:
                if self.call.outputs_per_step[j] > 1 and not all(
                    u.target is operator.getitem and u.args[1] == self.call.output_index for u in readers
                ):
                    return f"the model reads an output of {node.target} other than the one the task returns"
                continue
            for reader in readers:
                if reader not in inside or (reader in self.reads and not set(reader.users) <= inside):
                    return (
                        f"the model makes the task's calls, but also reads the result of {node.target} "
                        "inside them, which the kernel does not return"
                    )
        return None


def aten_calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]


def matches(call: TaskCall, gm: torch.fx.GraphModule, decomposed: bool = False):
    """Each unification of a task's calls with the graph, from a call of its final op. With
    `decomposed` (the graph went through Inductor's decompositions), only from calls that were the
    model's own."""
    for node in aten_calls(gm):  # listed first: a pass erases calls as it goes
        if captured_form(node)[0] is not call.anchor:
            continue
        original = node.meta.get("original_aten")
        if decomposed and original is not None and str(original) != str(node.target):
            continue
        match = Match(call)
        if match.step(call.final, node):
            yield match
