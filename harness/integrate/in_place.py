"""A patched graph's writes made in place again, as eager made them, before it runs as FX code.

Dynamo's ATen graph is functional: each `x[:, i] = y` of the model becomes a select_scatter that
copies all of x, and a loop of them (Qwen3.5's chunked delta rule writes its output one chunk at a
time) copies it once a chunk. That made the bare graph pass 1.4x slower than eager on the H200
(docs/integrate.md). torch's reinplace pass turns the scatters back into writes
through views, and out-of-place calls into in-place ones, where no other reader sees the
difference; Inductor does as much for the graphs it compiles. The calls it must not touch are
hidden from it (it takes only OpOverloads) and given back after.
"""

from __future__ import annotations

import copy
import operator

import torch


def rewrite(gm: torch.fx.GraphModule, kernel_namespace: str) -> None:
    """Makes `gm`'s writes in place; the caller recompiles its code. If torch's pass raises, `gm`
    is given its functional graph back and the error goes on. Hidden from the pass:
    - calls it would change the layout of: it checks an op's self argument for size and dtype, not
      strides, and `add(x_t, y)` of a transposed x is contiguous where `x_t.add_(y)` is transposed
      (a later group norm that needs it contiguous fails);
    - writes into a kernel's result or a view of it (ops of `kernel_namespace`): a kernel may hand
      back a buffer it keeps and reads again (an output reused from call to call), which the
      functional graph never wrote into.
    Recompiling a graph's code is the dear part (about a second per 10,000 calls on the CPU
    machine), so the graph is rewritten where it is rather than in a copy of the module, and its
    code compiled once, after the last rewrite (twice when the pass fails: setting the functional
    graph back compiles it)."""
    from torch.fx.passes.reinplace import reinplace

    functional = copy.deepcopy(gm.graph)
    of_kernels = _kernel_results(gm.graph, kernel_namespace)
    hidden = {
        n: n.target
        for n in gm.graph.nodes
        if _layout_changes(n) or (_calls_op(n) and not n.target.is_view and n.args and n.args[0] in of_kernels)
    }
    for node, op in hidden.items():
        node.target = _hidden(op)
    try:  # the traced inputs' fake tensors say which values alias the model's inputs
        reinplace(gm, *[n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"])
    except Exception:
        gm.graph = functional  # recompiles it
        raise
    for node, op in hidden.items():
        node.target = op


def _hidden(op):
    """An op the reinplace pass must leave out-of-place: it skips what is not an OpOverload."""

    def hidden(*args, **kwargs):
        return op(*args, **kwargs)

    return hidden


def _calls_op(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)


def _kernel_results(graph: torch.fx.Graph, namespace: str) -> set[torch.fx.Node]:
    """The kernels' results in a graph (each of a kernel's several, where its task returns a tuple),
    and every view of them."""
    found: set[torch.fx.Node] = set()
    for node in graph.nodes:  # in order: a view comes after what it views
        if node.op == "call_function" and node.target is operator.getitem and node.args[0] in found:
            found.add(node)
        if not _calls_op(node):
            continue
        if node.target.namespace == namespace or (node.target.is_view and node.args and node.args[0] in found):
            found.add(node)
    return found


def _layout_changes(node: torch.fx.Node) -> bool:
    """Whether an out-of-place call's result is laid out otherwise than its self argument, so that
    making it in place would hand its readers another layout. Views are left to the pass: they
    alias, and it reads them to undo scatters."""
    if not _calls_op(node) or node.target.is_view:
        return False
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    out, self_arg = node.meta.get("val"), node.args[0].meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(self_arg, torch.Tensor):
        return False
    return (tuple(out.shape), tuple(out.stride())) != (tuple(self_arg.shape), tuple(self_arg.stride()))
