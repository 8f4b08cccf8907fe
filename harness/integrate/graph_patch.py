"""The interposer: a torch.compile backend whose pass over the traced ATen graph replaces a
subgraph by a kept kernel when, and only when, it makes exactly its task's calls (signature.py): the
same ops, in the same dataflow, on tensors of the captured shapes, dtypes, strides and devices, with
the same other arguments, and with no intermediate result read elsewhere that the task does not
return (a task returning several, a residual sum beside its norm, has each reader of each rewired to
the kernel's). Every other call stays PyTorch's. The patched graph runs as FX code, or under
Inductor (each kernel an opaque custom op to it). A kernel that raises falls back to the task's
own calls for that call, and the fallback is counted.

Chosen by measurement (docs/integrate.md, "Why a graph pass"): a dispatch mode sees every ATen call of
the forward from Python, 17.7 us each on the H200's host, which made ResNet-50 1.75-2.4x slower with
no kernel in it. The pass decides once, when the graph is traced, and pays nothing for the calls it
leaves alone; the graph says which outputs anything reads, and in-place calls are functional there.
Dynamo's guards trace anew for inputs of another shape, dtype or layout, where no captured
signature appears: those calls go to PyTorch.

With `record`, the pass leaves the calls as they are and copies the inputs and output of every match
(up to eight a kernel): the model's own activations, which the guard checks kernels on (guard.py).
"""

from __future__ import annotations

import copy
import operator
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from harness.evaluate.timing import clone_inputs
from harness.integrate import direct_calls, in_place
from harness.integrate.matching import CAPTURED_AS, Match, aten_calls, captured_form, matches
from harness.integrate.signature import TaskCall

# Recorded calls per kernel: a layer repeated 40 times is checked on its first eight.
MAX_RECORDED = 8
# Each kernel's custom op, numbered across the process (ops cannot be defined twice).
_NAMESPACE, _OPS = "forgebench_e2e", 0
# Inductor keeps such an op's inputs in the strides the graph gave them (older torch: the order only).
_EXACT_STRIDES = getattr(torch.Tag, "needs_exact_strides", torch.Tag.needs_fixed_stride_order)


@dataclass
class Kernel:
    """A kept kernel in place of its task's calls."""

    task_id: str
    call: TaskCall
    module: torch.nn.Module


class Patch:
    """The backend and its counts: calls each kernel ran, fallbacks after it raised, and the calls
    of the kernels' final ops it left alone because they did not match."""

    def __init__(self, kernels: list[Kernel], record: bool = False):
        self.kernels, self.record = kernels, record
        self.anchors = {k.call.anchor for k in kernels}
        self.hits: Counter = Counter()
        self.fallbacks: Counter = Counter()
        self.errors: dict[str, str] = {}
        self.recorded: dict[str, list[tuple[list, torch.Tensor]]] = {k.task_id: [] for k in kernels}
        self.graph_calls = 0  # ATen calls in the traced graphs
        self.replaced = 0  # subgraphs sent to a kernel
        self.unmatched = 0  # graph calls of the kernels' final ops left to PyTorch (no task matched them)
        self.left_open: dict[str, str] = {}  # task id -> why its calls, found, could not be replaced
        self.reinplace_error: str | None = None  # why a graph ran functional (_in_place)
        # Kernels switched off: their ops run the task's own calls. The guard weighs a smaller kept set
        # on the same pass (a pass over an LLM's graph takes a minute) before it passes the graph again.
        self.off: set[str] = set()
        self._library = torch.library.Library(_NAMESPACE, "FRAGMENT")
        self._matched: dict[Any, tuple] = {}  # each kernel op -> its inputs as matched (eager_input_vals)
        # Each traced graph (by identity), this pass over a copy of it, and how often it ran.
        self._passed: dict[torch.fx.GraphModule, torch.fx.GraphModule] = {}
        self._runs: Counter = Counter()
        self._sites: dict[torch.fx.GraphModule, Counter] = {}  # recording: matches of each task in each graph

    def compile(self, model: torch.nn.Module, inductor: bool = False, cudagraphs: bool = False):
        """The model under the pass: its graphs run as FX code, or with `inductor` are compiled by
        Inductor around the kernels (each an opaque custom op to it). Inductor's decompositions of
        the kernels' ops are left out, so the pass sees them as the capture recorded them. To run
        several passes over one model, trace it once (Traced) and give each its `using`."""
        if not inductor:
            from harness.integrate.traced import Traced

            return Traced(model).using(self)
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner
        from torch._inductor.decomposition import select_decomp_table

        full = select_decomp_table()
        kept = {op for k in self.kernels for op, _, _ in k.call.steps} | set(CAPTURED_AS)
        table = {op: fn for op, fn in full.items() if op not in kept}
        held_back = {op for op in full if op in kept}

        def inner(gm, example_inputs, **kwargs):
            gm = self._pass(gm, example_inputs, decomposed=True)
            # The kernels' ops that no kernel took are decomposed now, as Inductor would have: it
            # fuses them as in plain torch.compile, where an op left whole would run as a library
            # call (and torch 2.11 refuses to fall back on an op it has a decomposition for).
            if {n.target for n in aten_calls(gm)} & held_back:
                gm = _decompose(gm, example_inputs, full, self._matched)  # what theirs decompose into, too
            return compile_fx_inner(gm, example_inputs, **kwargs)

        def backend(gm, example_inputs):
            # A cached compilation of the same graph would skip the pass.
            with (
                torch._functorch.config.patch(enable_autograd_cache=False),
                torch._inductor.config.patch(fx_graph_cache=False),
            ):
                # cudagraphs: Inductor's CUDA graphs, as torch.compile(mode="reduce-overhead") sets them.
                patches = {"triton.cudagraphs": True} if cudagraphs else None
                return compile_fx(gm, example_inputs, inner_compile=inner, decompositions=table, config_patches=patches)

        return torch.compile(model, backend=backend, dynamic=False)

    def over(self, traced: torch.fx.GraphModule) -> torch.fx.GraphModule:
        """This pass over a copy of a traced graph, made at its first run."""
        if traced not in self._passed:
            if self.record:
                self._sites[traced] = self._matches(traced)
            # A graph module of its own over the same attributes: the pass rewrites it, the trace stays.
            gm = self._pass(torch.fx.GraphModule(traced, copy.deepcopy(traced.graph)), None, recompile=self.record)
            if not self.record:  # the recording pass stays functional: the record of what the model computes
                self._in_place(gm)
            self._passed[traced] = gm
        self._runs[traced] += 1
        return self._passed[traced]

    def _in_place(self, gm: torch.fx.GraphModule) -> None:
        """The graph's writes made in place again (in_place.py), if torch's pass can (else it runs
        functional, with the reason kept); then its code compiled, each call straight to its
        operator (direct_calls.py)."""
        try:
            in_place.rewrite(gm, kernel_namespace=_NAMESPACE)
        except Exception as exc:
            self.reinplace_error = f"{type(exc).__name__}: {exc}"[:300]
        direct_calls.bind(gm)
        gm.recompile()

    def sites(self) -> Counter:
        """Calls at each task's signature in the runs so far, whichever kernel takes them (a longer
        chain's may): what a kernel's share of the model's time is a share of. Counted by a
        recording pass; with graph breaks, a graph counts as often as it ran."""
        total: Counter = Counter()
        for traced, counts in self._sites.items():
            for task_id, n in counts.items():
                total[task_id] += n * self._runs[traced]
        return total

    def release(self) -> None:
        """Drops this pass's graphs; the counts stay. (Its ops stay registered, and keep the Patch.)"""
        self._passed.clear()

    def _matches(self, gm: torch.fx.GraphModule) -> Counter:
        found: Counter = Counter()
        for kernel in self.kernels:
            found[kernel.task_id] += sum(1 for _ in matches(kernel.call, gm))
        return +found  # tasks with no call at their signature left out

    def _pass(
        self, gm: torch.fx.GraphModule, example_inputs, decomposed: bool = False, recompile: bool = True
    ) -> torch.fx.GraphModule:
        """`decomposed`: the graph went through Inductor's decompositions, whose calls (silu's mul)
        are not the model's own: only calls that were already there are matched. Without
        `recompile`, the caller compiles the graph's code (after rewriting it further)."""
        self.graph_calls += len(aten_calls(gm))
        # Longest chains first: a fused task's kernel takes its whole subgraph before a single
        # op's kernel could take one of its calls.
        for kernel in sorted(self.kernels, key=lambda k: -len(k.call.steps)):
            for match in matches(kernel.call, gm, decomposed):
                why = match.left_open()
                if why:
                    self.left_open.setdefault(kernel.task_id, why)
                    continue
                _erase_unread(gm.graph, self._replace(gm, match, kernel))
        gm.graph.eliminate_dead_code(is_impure_node=lambda n: not _pure(n))
        self.unmatched += sum(captured_form(n)[0] in self.anchors for n in aten_calls(gm))
        gm.graph.lint()
        if recompile:
            gm.recompile()
        return gm

    def _replace(self, gm: torch.fx.GraphModule, match: Match, kernel: Kernel) -> set[torch.fx.Node]:
        """The match's last call becomes a call of the kernel's custom op on the subgraph's inputs,
        and every reader outside the match of a result the task returns reads the kernel's (its
        getitems, where the task returns several); the chain's calls then feed nothing: they are
        returned, to be erased."""
        call = kernel.call
        final = match.steps[call.final]
        inside = set(match.steps.values()) | match.reads
        # Per returned result: the graph node holding it (a multi-output op's getitem of it, if read).
        holders = []
        for out in call.outputs:
            node = match.steps[out.step]
            if call.outputs_per_step[out.step] > 1:
                gets = [u for u in node.users if u.target is operator.getitem and u.args[1] == out.output]
                holders.append((gets, node.meta["val"][out.output]))
            else:
                holders.append(([node], node.meta["val"]))
        values = [value for _, value in holders]
        layouts = [_strided(match.inputs[i].meta.get("val")) for i in range(call.n_inputs)]
        op = self._custom_op(kernel, values, layouts)
        with gm.graph.inserting_before(final):
            new = gm.graph.call_function(op, tuple(match.inputs[i] for i in range(call.n_inputs)))
            getters = [
                gm.graph.call_function(operator.getitem, (new, k)) for k in range(len(values) if call.multi else 0)
            ]
        results = getters or [new]  # a lone result is the op's own: it returns a tensor, not a tuple
        new.meta["val"] = tuple(values) if call.multi else values[0]
        for result, value in zip(results, values):
            result.meta["val"] = value
        # The inputs as the pass matched them: what Inductor holds an exact-strides op's inputs to
        # (kept by op too, for a graph traced again after the pass).
        self._matched[op] = (tuple(match.inputs[i].meta.get("val") for i in range(call.n_inputs)), {})
        new.meta["eager_input_vals"] = self._matched[op]
        for (nodes, _), result in zip(holders, results):
            for node in nodes:
                node.replace_all_uses_with(result, delete_user_cb=lambda user: user not in inside)
        self.replaced += 1
        return inside | {n for nodes, _ in holders for n in nodes}

    def _custom_op(self, kernel: Kernel, values: list[torch.Tensor], layouts: list[tuple]):
        """The kernel as an op of its own (forgebench_e2e::kN(Tensor i0, Tensor i1, ...) -> Tensor, or
        a tuple of as many tensors as the task returns): opaque to Inductor, which calls it as it
        would a library kernel, and plain in an FX graph. Inductor may lay tensors out otherwise
        than the graph did (channels-last around convolutions): the tag makes it hand the op its
        inputs in the strides they had when the pass matched them."""
        global _OPS
        _OPS += 1
        name = f"k{_OPS}"
        # One argument a tensor: Inductor keeps the strides of tensor arguments, not of a list's items.
        arguments = ", ".join(f"Tensor i{j}" for j in range(len(layouts)))
        returns = "Tensor" if len(values) == 1 else "(" + ", ".join("Tensor" for _ in values) + ")"
        self._library.define(f"{name}({arguments}) -> {returns}", tags=(_EXACT_STRIDES,))
        run = self._replacement(kernel, values, layouts)
        self._library.impl(name, run, "CompositeExplicitAutograd")
        declared = [(tuple(v.shape), tuple(v.stride()), v.dtype, v.device) for v in values]

        def fake(*inputs):
            made = [torch.empty_strided(shape, stride, dtype=dtype, device=at) for shape, stride, dtype, at in declared]
            return made[0] if len(made) == 1 else tuple(made)

        torch.library.register_fake(f"{_NAMESPACE}::{name}", fake, lib=self._library)
        return getattr(getattr(torch.ops, _NAMESPACE), name).default

    def _replacement(self, kernel: Kernel, expected: list[torch.Tensor], layouts: list[tuple]):
        """What the custom op runs: the kernel (or, recording, the task's own calls) on the
        subgraph's inputs; the task's calls again if the kernel raises or an input arrives in
        another layout than the one matched (a kernel may assume it); its results in the layouts
        the graph declared for them."""
        call = kernel.call
        wanted = [(tuple(e.shape), tuple(e.stride()), e.dtype, e.device) for e in expected]

        def declared(result, inputs: tuple):
            """The results as the op's schema and fake declare them: new tensors (one sharing an input's
            storage, or another result's, is copied), in the graph's strides."""
            results = list(result) if call.multi else [result]
            made = []
            for t, (shape, stride, dtype, _) in zip(results, wanted):
                if tuple(t.stride()) != stride or _shares_storage(t, (*inputs, *made)):
                    t = torch.empty_strided(shape, stride, dtype=dtype, device=t.device).copy_(t)
                made.append(t)
            return tuple(made) if call.multi else made[0]

        def checked(result) -> None:
            """TypeError unless the kernel returned what the task does: as many tensors, each as declared."""
            results = list(result) if call.multi and isinstance(result, (tuple, list)) else [result]
            if len(results) != len(wanted) or not all(isinstance(t, torch.Tensor) for t in results):
                raise TypeError(f"the kernel returned {type(result).__name__}, not {len(wanted)} tensor(s)")
            for t, (shape, _, dtype, device) in zip(results, wanted):
                if tuple(t.shape) != shape or t.dtype != dtype or t.device.type != device.type:
                    raise TypeError(f"the kernel returned {t.dtype} {tuple(t.shape)} on {t.device}")

        def forgebench_kernel(*inputs):
            if self.record:
                result = call.replay(list(inputs))
                if len(self.recorded[kernel.task_id]) < MAX_RECORDED:
                    # Copied with their strides: a kernel is checked on the layout the model gives it.
                    copies, outputs = clone_inputs(inputs), clone_inputs(list(result) if call.multi else [result])
                    self.recorded[kernel.task_id].append((copies, tuple(outputs) if call.multi else outputs[0]))
                return declared(result, inputs)
            if kernel.task_id in self.off:
                return declared(call.replay(list(inputs)), inputs)
            try:
                moved = [i for i, (t, want) in enumerate(zip(inputs, layouts)) if _strided(t) != want]
                if moved:
                    raise TypeError(f"input {moved[0]} arrived as {_strided(inputs[moved[0]])}, not as matched")
                result = kernel.module(*inputs)
                checked(result)
            except Exception as exc:  # the guard's run-time half: PyTorch answers instead
                self.fallbacks[kernel.task_id] += 1
                self.errors.setdefault(kernel.task_id, f"{type(exc).__name__}: {exc}"[:300])
                return declared(call.replay(list(inputs)), inputs)
            self.hits[kernel.task_id] += 1
            return declared(result, inputs)

        return forgebench_kernel


def _erase_unread(graph: torch.fx.Graph, nodes: set[torch.fx.Node]) -> None:
    """A replaced chain's calls, once nothing reads them, erased. A dead-code pass over the whole
    graph after each replacement made a pass quadratic: 10.5 s for 300 replacements in a graph of
    2,100 calls on the CPU machine, 9.5 s of it in dead-code elimination."""
    left = {n for n in nodes if _pure(n)}
    while unread := [n for n in left if not n.users]:
        for node in unread:
            graph.erase_node(node)
            left.discard(node)


def _pure(node: torch.fx.Node) -> bool:
    """Whether a call can go once nothing reads it. A random op counts as pure here, as in Dynamo's
    tracing context where the pass once ran: a replaced chain's rand_like would otherwise run on."""
    try:
        return not node.is_impure(impure_random=False)
    except TypeError:  # a torch whose is_impure takes no such argument
        return not node.is_impure()


def _decompose(gm: torch.fx.GraphModule, example_inputs, table: dict, matched: dict) -> torch.fx.GraphModule:
    """The graph traced again with `table`'s decompositions, on fake tensors (no kernel runs); each
    kernel's op stays whole (its fake impl traces it) and keeps the input layouts it was matched with."""
    import contextlib

    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    mode = detect_fake_mode(example_inputs)
    with mode or contextlib.nullcontext():
        traced = make_fx(gm, decomposition_table=table, tracing_mode="real" if mode else "fake")(*example_inputs)
    for node in traced.graph.nodes:
        if node.op == "call_function" and node.target in matched:
            node.meta["eager_input_vals"] = matched[node.target]
    return traced


def _strided(t: Any) -> tuple | None:
    return (tuple(t.shape), tuple(t.stride()), t.dtype) if isinstance(t, torch.Tensor) else None


def _shares_storage(result: torch.Tensor, inputs: tuple) -> bool:
    storage = result.untyped_storage().data_ptr()
    return any(isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == storage for t in inputs)
