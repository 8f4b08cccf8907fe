"""A model's repeated blocks (a transformer's decoder layers, a ResNet stage's bottlenecks), traced
block by block so that each distinct block is traced, matched and rewritten once and its repeats
reuse that work: the cost of integrating then follows the number of distinct blocks, not the depth.

Dynamo keeps one compiled graph per code object and guard set; it lifts a module's parameters to
graph inputs, so two blocks of one class whose parameters have the same shapes, dtypes and layouts
pass the same guards and run the same graph (torch's "regional compilation"). The code around the
blocks (an embedding, a final norm, a generation loop) runs as eager runs it: no kernel goes in
there. A block holding a Python constant that differs between repeats (transformers' `layer_idx`)
is traced once per value, as a whole-model trace would trace it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

# Enough compiled graphs for every distinct block at every shape it is called at (an LLM's decode
# steps call each layer at a new length): past Dynamo's limits, it would run a frame eagerly with
# no word, and the kernels would silently not go in.
RECOMPILE_LIMIT = 4096


def key(module: torch.nn.Module) -> tuple:
    """What makes two blocks the same block: their class and every parameter's and buffer's name,
    shape and dtype."""
    tensors = [*module.named_parameters(), *module.named_buffers()]
    return (type(module), tuple((name, tuple(t.shape), t.dtype) for name, t in tensors))


def repeated(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The blocks to trace one by one: the children of a ModuleList or Sequential, of a class of
    which two children there are the same block (key), outermost containers first. A leaf (a
    Linear) is no block: tracing leaves alone would leave the model's own code untraced."""
    found: list[torch.nn.Module] = []
    inside: set[int] = set()
    for module in model.modules():
        if id(module) in inside or not isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        children = [c for c in module.children() if any(True for _ in c.children())]
        keys = [key(c) for c in children]
        classes = {k[0] for k in keys if keys.count(k) >= 2}
        for child in children:
            if type(child) in classes:
                found.append(child)
                inside.update(id(m) for m in child.modules())
    return found


def described(blocks: list[torch.nn.Module]) -> str:
    """How the model was traced, in words, for the record and the table."""
    if not blocks:
        return "the whole model in one trace"
    distinct = len({key(b) for b in blocks})
    names = sorted({type(b).__name__ for b in blocks})
    return (
        f"{len(blocks)} repeated blocks ({', '.join(names)}; {distinct} distinct) traced once each distinct block; "
        "the code around them runs as eager"
    )


class Regions:
    """The blocks' forwards, each run through one compiled function per block class (and so one
    trace per distinct block), while `installed`; otherwise the model is as the user built it."""

    def __init__(self, blocks: list[torch.nn.Module], compile_forward: Callable[[Callable], Callable]):
        self.blocks = blocks
        by_class: dict[type, Callable] = {}
        for block in blocks:
            if type(block) not in by_class:
                by_class[type(block)] = compile_forward(type(block).forward)
        self._forward = by_class

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        own = {id(b): b.__dict__["forward"] for b in self.blocks if "forward" in b.__dict__}
        for block in self.blocks:
            block.forward = self._forward[type(block)].__get__(block)
        try:
            with torch._dynamo.config.patch(
                recompile_limit=max(RECOMPILE_LIMIT, torch._dynamo.config.recompile_limit),
                accumulated_recompile_limit=max(RECOMPILE_LIMIT, torch._dynamo.config.accumulated_recompile_limit),
            ):
                yield
        finally:
            for block in self.blocks:
                if id(block) in own:
                    block.forward = own[id(block)]
                else:
                    del block.forward
