"""A model's repeated blocks (a transformer's decoder layers, a ResNet stage's bottlenecks), traced
block by block so that each distinct block is traced, matched and rewritten once and its repeats
reuse that work: the cost of integrating then follows the number of distinct blocks, not the depth.

Dynamo keeps one compiled graph per code object and guard set; it lifts a module's parameters to
graph inputs, so two blocks of one class whose parameters have the same shapes, dtypes and layouts
pass the same guards and run the same graph (torch's "regional compilation"). The code around the
blocks (an embedding, a final norm, a generation loop) runs as eager runs it: no kernel goes in
there.

A Python constant that differs between repeats is traced once per value. transformers' decoder
layers hold one, `layer_idx`, which their modules pass to the KV cache (`past_key_values.update(k, v,
self.layer_idx)`); Qwen3.5's and Gemma 4's use it for nothing else. So a repeat given a cache runs
as its block's first instance (Slot): its modules' `layer_idx` set to that instance's and its own
cache entry swapped into that instance's place in the cache's list for the call, then both put
back. Each layer reads and writes its own entry through one trace. (Dynamo cannot take the index as
a graph input: indexing the cache's Python list with it specializes on its value all the same.) A
model that read the index for anything else would compute otherwise when traced, which the e2e
report shows as the traced graph's disagreement with eager.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

# Enough compiled graphs for every distinct block at every shape it is called at (an LLM's decode
# steps call each layer at a new length): past Dynamo's limits, it would run a frame eagerly with
# no word, and the kernels would silently not go in.
RECOMPILE_LIMIT = 4096

# transformers' name for the index a decoder layer's modules pass to the cache (Cache.layers).
CACHE_INDEX = "layer_idx"


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


def cache_index(block: torch.nn.Module) -> int | None:
    """The cache index the block's modules hold (CACHE_INDEX), when they hold one and the same."""
    held = {m.__dict__[CACHE_INDEX] for m in block.modules() if type(m.__dict__.get(CACHE_INDEX)) is int}
    return held.pop() if len(held) == 1 else None


@dataclass
class Slot:
    """A repeat run as its block's first instance: its modules' cache index `own` set to `first`,
    and its cache entry `own` swapped with entry `first` in each cache the call is given, for the call."""

    block: torch.nn.Module
    own: int
    first: int

    def caches(self, args: tuple, kwargs: dict) -> list | None:
        """The caches among the call's arguments, or None when there is none, or one whose list
        does not hold both entries (a cache that adds its layers as they first write): the layer
        then runs at its own index."""
        cache_type = getattr(sys.modules.get("transformers.cache_utils"), "Cache", None)
        found = [a for a in (*args, *kwargs.values()) if cache_type is not None and isinstance(a, cache_type)]
        holds = lambda c: isinstance(getattr(c, "layers", None), list) and len(c.layers) > max(self.own, self.first)
        return found if found and all(holds(c) for c in found) else None

    @contextlib.contextmanager
    def taken(self, caches: list) -> Iterator[None]:
        modules = [m for m in self.block.modules() if type(m.__dict__.get(CACHE_INDEX)) is int]
        self._swap(caches)
        for m in modules:
            setattr(m, CACHE_INDEX, self.first)
        try:
            yield
        finally:
            for m in modules:
                setattr(m, CACHE_INDEX, self.own)
            self._swap(caches)

    def _swap(self, caches: list) -> None:
        for cache in caches:
            cache.layers[self.own], cache.layers[self.first] = cache.layers[self.first], cache.layers[self.own]


def slots(blocks: list[torch.nn.Module]) -> dict[int, Slot]:
    """For each repeat holding a cache index other than its block's first instance's: its Slot."""
    first: dict[tuple, int] = {}
    found = {}
    for block in blocks:
        own = cache_index(block)
        if own is None:
            continue
        first.setdefault(key(block), own)
        if first[key(block)] != own:
            found[id(block)] = Slot(block, own, first[key(block)])
    return found


def described(blocks: list[torch.nn.Module]) -> str:
    """How the model was traced, in words, for the record and the table."""
    if not blocks:
        return "the whole model in one trace"
    distinct = len({key(b) for b in blocks})
    names = sorted({type(b).__name__ for b in blocks})
    bound = f", each layer run at its block's first {CACHE_INDEX} (its own cache entry moved there)"
    return (
        f"{len(blocks)} repeated blocks ({', '.join(names)}; {distinct} distinct) traced once each distinct block"
        f"{bound if slots(blocks) else ''}; the code around them runs as eager"
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
        self._slots = slots(blocks)

    def _bound(self, block: torch.nn.Module) -> Callable:
        compiled, slot = self._forward[type(block)], self._slots.get(id(block))
        if slot is None:
            return compiled.__get__(block)

        def forward(*args, **kwargs):
            caches = slot.caches(args, kwargs)
            with slot.taken(caches) if caches else contextlib.nullcontext():
                return compiled(block, *args, **kwargs)

        return forward

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        own = {id(b): b.__dict__["forward"] for b in self.blocks if "forward" in b.__dict__}
        for block in self.blocks:
            block.forward = self._bound(block)
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
