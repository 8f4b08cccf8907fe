"""A patched graph's code calling each op's C++ operator straight, not through `torch.ops`.

FX writes each call as `torch.ops.aten.view.default(x, ...)`: four attribute lookups through
torch's Python op namespaces, then OpOverload.__call__'s Python frame, before the operator that
eager's parsed `x.view(...)` reaches in C++. On a host-bound model that is the graph pass's cost
over eager: Qwen3.5 on the H200 took 117.7 ms as FX code against eager's 111.6 ms (docs/
integrate.md). Each call here goes to `op._op`, the operator OpOverload.__call__ itself calls with
the same arguments, held in the code's globals: the same dispatch (modes, fallbacks and all), less
the Python on the way. benchmarks/direct_calls_cost.py measures it.
"""

from __future__ import annotations

import copy
import functools
import sys

import torch


class _Operator(functools.partial):
    """An op's C++ operator under the op's name: a C callable (no Python frame of its own) that FX
    keeps in the code's globals, where the operator itself has no name FX can write."""


@functools.cache
def _direct(op: torch._ops.OpOverload) -> _Operator:
    call = _Operator(op._op)
    call.__name__ = call.__qualname__ = str(op).replace(".", "_")
    call.__module__ = __name__  # not torch's: FX then holds the object, not a dotted path to it
    call.op = op  # what it calls, for whoever reads the graph after
    # Where the name says it is: a pickled graph's code imports each of its globals by name.
    setattr(sys.modules[__name__], call.__name__, call)
    return call


def bind(gm: torch.fx.GraphModule) -> None:
    """Points each OpOverload call of `gm`'s graph at its operator; the caller recompiles the code.
    Run last: passes that read a node's op (matching, torch's reinplace) know OpOverloads only."""
    for node in gm.graph.nodes:
        # Exactly OpOverload: a TorchBindOpOverload's own __call__ does more than call its operator.
        if node.op == "call_function" and type(node.target) is torch._ops.OpOverload:
            node.target = _direct(node.target)


def as_written(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A bound graph as FX writes it, each call through `torch.ops`, beside it: what binding is
    measured and checked against."""
    written = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    for node in written.graph.nodes:
        node.target = getattr(node.target, "op", node.target)
    written.recompile()
    return written
