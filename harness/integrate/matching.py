"""Where a task's calls are in a traced ATen graph: a unification of the task's steps (signature.py)
with graph nodes, from a call of its final op back through the dataflow, on values of the captured
shapes, dtypes, strides and devices and the same other arguments (then, for a task returning several
results, the steps its final one does not read, among the readers of what is matched); and why a
found match cannot be replaced (a result inside it that the task does not return read elsewhere).
The graph pass (graph_patch.py) replaces what it finds."""

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

    def complete(self) -> bool:
        """Unifies the steps the final one does not read (a returned intermediate that nothing later
        in the chain reads) with readers of the values already matched; whether every step is."""
        for j in range(len(self.call.steps)):
            if j not in self.steps and not any(self._attempt(j, node) for node in self._readers_of_args(j)):
                return False
        return True

    def _attempt(self, j: int, node: torch.fx.Node) -> bool:
        """step(j, node), its unifications undone if it fails."""
        before = dict(self.steps), dict(self.inputs), set(self.reads)
        if self.step(j, node):
            return True
        self.steps, self.inputs, self.reads = before
        return False

    def _readers_of_args(self, j: int) -> list[torch.fx.Node]:
        """The graph's readers of step j's arguments that are matched already: where step j can be."""
        found: dict[torch.fx.Node, None] = {}
        _, args, kwargs = self.call.steps[j]
        for want in [*args, *kwargs.values()]:
            if isinstance(want, Input) and want.index in self.inputs:
                found.update(dict.fromkeys(self.inputs[want.index].users))
            elif isinstance(want, Step) and want.step in self.steps:
                node = self.steps[want.step]
                if self.call.outputs_per_step[want.step] > 1:
                    for get in node.users:
                        if get.target is operator.getitem and get.args[1] == want.output:
                            found.update(dict.fromkeys(get.users))
                else:
                    found.update(dict.fromkeys(node.users))
        return list(found)

    def left_open(self) -> str | None:
        """Why the matched calls cannot be replaced, or None: a result inside the match that the task
        does not return is read by a call outside it (of the final call, an output other than the
        ones forward returns: batch norm's saved statistics are not, in inference), or a returned
        intermediate is read before the chain's last call, where the kernel's results are not yet made."""
        final = self.steps[self.call.final]
        inside = set(self.steps.values()) | self.reads
        if len(self.steps) != len(self.call.steps) or len(self.inputs) != self.call.n_inputs:
            return "the matched calls do not cover the task"  # not reached: matches() completes them all
        outside_readers: set[torch.fx.Node] = set()
        for j, node in self.steps.items():
            returned, multi = self.call.returned(j), self.call.outputs_per_step[j] > 1
            if returned and not multi:
                outside_readers.update(u for u in node.users if u not in inside)
                continue
            for reader in node.users:
                if multi and reader.target is operator.getitem and reader.args[1] in returned:
                    outside_readers.update(u for u in reader.users if u not in inside)
                elif reader not in inside or (reader in self.reads and not set(reader.users) <= inside):
                    if returned:
                        return f"the model reads an output of {node.target} other than the one the task returns"
                    return (
                        f"the model makes the task's calls, but also reads the result of {node.target} "
                        "inside them, which the kernel does not return"
                    )
        return self._out_of_order(final, outside_readers) if self.call.multi else None

    def _out_of_order(self, final: torch.fx.Node, outside_readers: set[torch.fx.Node]) -> str | None:
        """The kernel takes the final call's place: every matched call must come before it in the
        graph, and every outside reader of a returned result after it. Walked from each matched call
        to the final one (a chain's calls lie close together)."""
        for node in set(self.steps.values()) - {final}:
            at = node.next
            while at is not final:
                if at.op in ("output", "root"):
                    return f"the model makes {node.target} of the task's calls after the last one"
                if at in outside_readers:
                    return (
                        f"the model reads a result the task returns ({node.target}'s) before the chain's "
                        "last call, where the kernel's results are not yet made"
                    )
                at = at.next
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
        if match.step(call.final, node) and match.complete():
            yield match
