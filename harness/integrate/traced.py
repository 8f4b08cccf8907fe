"""One Dynamo trace of a model, which many passes of the graph pass (graph_patch.Patch) run over:
recording the activations, checking the kept set, timing each kept set and the bare graph pass.
Tracing is the dear part (docs/integrate.md, "One trace per model run")."""

from __future__ import annotations

import functools
import sys
from contextlib import contextmanager
from typing import Protocol

import torch

from harness.errors import ForgeBenchError


class GraphPass(Protocol):
    """A pass over traced graphs (graph_patch.Patch): each graph as the pass runs it."""

    def over(self, traced: torch.fx.GraphModule) -> torch.fx.GraphModule: ...


class Traced:
    """A model traced once by Dynamo into forward ATen graphs, each pass (Patch) run over copies of
    them: recording the activations, checking the kept set, timing each kept set and the bare graph
    pass all share one trace. Tracing is the dear part: an LLM's prefill and eight decode steps
    unroll into one graph of some 70,000 calls, minutes a trace (docs/integrate.md)."""

    def __init__(self, model: torch.nn.Module, reuse_blocks: bool = True):
        from torch._dynamo.backends.common import aot_autograd

        from harness.integrate import blocks

        self.graphs: list[torch.fx.GraphModule] = []
        self.patch: GraphPass | None = None
        # Forward graphs only: a backward graph's adds and muls are the gradient's, not the task's.
        traces = aot_autograd(fw_compiler=self._traced, bw_compiler=lambda gm, _: gm)

        def backend(gm: torch.fx.GraphModule, example_inputs):
            with _traced_as_eager_calls():  # while it traces only: the runs pay nothing for it
                return traces(gm, example_inputs)

        # A model of repeated blocks is traced block by block, each distinct block once (blocks.py).
        found = blocks.repeated(model) if reuse_blocks else []
        self.traced_as = blocks.described(found)
        if found:
            regions = blocks.Regions(found, lambda forward: torch.compile(forward, backend=backend, dynamic=False))

            def compiled(*args, **kwargs):
                with regions.installed():
                    return model(*args, **kwargs)

            self._compiled = compiled
        else:
            self._compiled = torch.compile(model, backend=backend, dynamic=False)

    def using(self, patch: GraphPass):
        """The model, run with `patch` over its graphs."""

        def run(*args, **kwargs):
            self.patch = patch
            with _library_paths_as_eager():  # at every call: Dynamo's guards see what the trace saw
                out = self._compiled(*args, **kwargs)
            if not self.graphs:
                raise ForgeBenchError(
                    "Dynamo ran the model without tracing it, so no kernel can go in: this process has compiled "
                    "it too often (torch._dynamo.config.recompile_limit); call torch._dynamo.reset() first."
                )
            return out

        return run

    def _traced(self, gm: torch.fx.GraphModule, example_inputs):
        index = len(self.graphs)
        self.graphs.append(gm)

        def run(*args):  # whichever pass is in use when the graph runs
            return self.patch.over(self.graphs[index])(*args)

        return run


# Ops torch's tracing replaces by Python decompositions (written for Inductor, which fuses what
# they become) where eager calls a kernel of its own, or nothing. Run as FX code they cost more:
# - a nearest upsample becomes aranges and an index gather: a 2x upsample of a 64x256x256 map took
#   120 ms against eager's 61 ms on the CPU machine; SD3.5's VAE upsamples to 1024x1024 three times;
# - dropout in eval becomes a clone, a full copy that eager does not make (eager returns its
#   input): one a ResNet block of SD3.5's VAE, and more in each transformer block.
# (docs/integrate.md, "Ops traced as eager calls them".)
_DECOMPOSED_AT = (torch._C.DispatchKey.CompositeImplicitAutograd, torch._C.DispatchKey.Autograd)


@functools.cache
def _eager_ops() -> tuple:
    packets = [getattr(torch.ops.aten, name) for name in dir(torch.ops.aten) if "upsample" in name]
    resampling = [getattr(p, o) for p in packets if hasattr(p, "overloads") for o in p.overloads()]
    return (*resampling, torch.ops.aten.dropout.default)


@contextmanager
def _traced_as_eager_calls():
    """While a model traces, _eager_ops go as eager runs them, not by torch's Python decompositions."""
    taken = []
    for op in _eager_ops():
        for key in _DECOMPOSED_AT:
            if key in op.py_kernels:
                taken.append((op, key, op.py_kernels.pop(key)))
                op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, key, kernel in taken:
            op.py_kernels[key] = kernel
            op._dispatch_cache.clear()


def _tracing_a_mask(tensor=None) -> bool:
    """transformers' is_tracing, asked of a mask tensor; with no mask, not tracing (as eager)."""
    return tensor is not None and sys.modules["transformers.utils.import_utils"].is_tracing(tensor)


@contextmanager
def _library_paths_as_eager():
    """transformers builds an explicit causal mask when it sees Dynamo trace (masking_utils.is_tracing:
    an export of dynamic shapes could not keep SDPA's is_causal), where eager, with no padding mask,
    passes none and lets SDPA mask causally, by flash attention on a GPU. On the CPU machine a small
    Qwen3.5's traced prefill took 1.3x eager's time, most of it the mask's build and the masked
    attention (docs/integrate.md). A Traced model runs at the shapes it was traced at, under
    Dynamo's guards, so eager's choice holds for it; a call given a mask still builds one, as its
    contents are the input's."""
    masking = sys.modules.get("transformers.masking_utils")
    original = getattr(masking, "is_tracing", None)
    if original is None:  # no transformers in this process, or one without the function
        yield
        return
    masking.is_tracing = _tracing_a_mask
    try:
        yield
    finally:
        masking.is_tracing = original
