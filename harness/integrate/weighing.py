"""The guard's weighing in eager mode (guard.settle over passes of the graph, docs/integrate.md): the
kept set timed beside eager in every phase the model is reported by (the whole forward; an LLM's
prefill alone, and its decode steps by difference), the kernel that saved least dropped while a
phase is slower; then the graph pass alone, and each kept kernel's own share of the gain.

A smaller kept set is weighed on the last pass with the rest switched off (a pass over an LLM's
graph takes a minute on the GPU's host); the set the guard settles on then gets a pass of its own,
and is timed, and settled, again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.integrate import guard
from harness.integrate.e2e_record import Decision, KernelFigures
from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.traced import Traced


@dataclass
class Variants:
    """What the weighing runs: each phase's trace and its eager run, and how to time forwards side
    by side (timing.measure_together, as ModelRun.together gives it)."""

    traced: dict[str, Traced]
    eager: dict[str, Callable]
    calling: Callable
    together: Callable[[dict], dict[str, dict]]
    llm: bool
    phase: Callable
    partial: Callable[[], dict]  # what the run has measured so far, for phase()
    settling: list[dict] = field(default_factory=list)


class EagerWeighing:
    def __init__(self, variants: Variants, decisions: list[Decision], confirm: Callable):
        self.v, self.decisions, self.confirm = variants, decisions, confirm
        self.passed: dict[str, tuple[Patch, Callable]] = {}  # the last pass of each phase
        self.passed_ids: set[str] = set()

    def release(self) -> None:
        """An earlier kept set's graphs: settle timed them and moved on."""
        for earlier, _ in self.passed.values():
            earlier.release()
        self.passed.clear()

    def _pass(self, kernels: list[Kernel]) -> None:
        ids = {k.task_id for k in kernels}
        if self.passed and ids <= self.passed_ids:
            return
        self.release()
        self.v.phase(f"passing the graph with {len(kernels)} kept kernels in place", self.v.partial())
        for name, each in self.v.traced.items():
            patch = Patch(kernels)
            self.passed[name] = (patch, self.v.calling(each.using(patch)))
        self.passed_ids = ids

    def patched(self, kernels: list[Kernel]) -> dict[str, guard.Run]:
        """Each phase with `kernels` in place (the rest of the last pass's switched off), timed beside eager."""
        self._pass(kernels)
        ids = {k.task_id for k in kernels}
        self.v.phase(f"timing the model with {len(kernels)} kept kernels in place", self.v.partial())
        outs, fns = {}, {}
        for name, (patch, run_patched) in self.passed.items():
            patch.off, patch.hits = self.passed_ids - ids, Counter()
            outs[name] = (run_patched(), dict(patch.hits))  # hits: one forward's
            fns[f"eager {name}"], fns[f"patched {name}"] = self.v.eager[name], run_patched
        timed = self.v.together(fns)  # every phase at one moment: a decode step is their difference
        runs = {
            name: guard.Run(self.passed[name][0], out, hits, timed[f"patched {name}"], timed[f"eager {name}"])
            for name, (out, hits) in outs.items()
        }
        if self.v.llm:
            whole, prefill = runs["model"], runs["prefill"]
            hits = Counter(whole.hits) - Counter(prefill.hits)
            by_difference = [
                guard.difference(a, b) for a, b in ((whole.timing, prefill.timing), (whole.eager, prefill.eager))
            ]
            runs["decode"] = guard.Run(None, None, dict(hits), *by_difference)
        # Each kept set the guard weighed: a run its timeout stops still tells.
        weighed = {name: {"patched": run.timing, "eager": run.eager} for name, run in runs.items()}
        self.v.settling.append({"kernels": sorted(ids), "switched_off": sorted(self.passed_ids - ids), **weighed})
        return runs

    def settle(self, kept: list[Kernel]) -> tuple[list[Kernel], dict[str, guard.Run]]:
        while True:
            kept, runs = guard.settle(kept, self.decisions, self.patched, self.confirm)
            if {k.task_id for k in kept} == self.passed_ids or not any(runs["model"].hits.values()):
                return kept, runs  # timed on a pass of just these kernels, or no kernel ran
            self.release()  # a pass of the settled set alone, timed and settled again

    def in_model(self, kept: list[Kernel], hits: dict[str, int]) -> dict[str, KernelFigures]:
        """Each kernel that ran, switched off in turn on the settled pass, the whole forward timed
        beside the pass with all of them on: what each saves in the model. Its op's time there is
        estimated as its in-place op_ms times its calls, which gives its in-model speedup."""
        ran = [k for k in kept if hits.get(k.task_id)]
        if not ran or "model" not in self.passed:
            return {}
        patch, run_patched = self.passed["model"]
        fns = {"all": run_patched}
        for kernel in ran:
            fns[kernel.task_id] = _switched_off(patch, run_patched, kernel.task_id)
        self.v.phase(f"timing the model with each of {len(ran)} kept kernels switched off", self.v.partial())
        timed = self.v.together(fns)
        patch.off = set()
        by_id = {d.task_id: d for d in self.decisions}
        figures = {}
        for kernel in ran:
            saving = timed[kernel.task_id]["median_ms"] - timed["all"]["median_ms"]
            op_total = (by_id[kernel.task_id].op_ms or 0.0) * hits[kernel.task_id]
            speedup = op_total / (op_total - saving) if op_total > saving else None
            figures[kernel.task_id] = KernelFigures(kernel.task_id, in_model_speedup=speedup, in_model_saving_ms=saving)
        return figures


def _switched_off(patch: Patch, run_patched: Callable, task_id: str) -> Callable:
    def run():
        patch.off = {task_id}
        try:
            return run_patched()
        finally:
            patch.off = set()

    return run


def graph_only(v: Variants) -> tuple[dict[str, dict], dict[str, Patch], dict[str, object]]:
    """The same graph pass with no kernel, each phase beside eager: what running the graph as FX
    code costs, and (its outputs) whether the traced graph alone computes what eager does."""
    bares, fns, outs = {}, {}, {}
    for name, each in v.traced.items():
        bare = Patch([])
        run_bare = v.calling(each.using(bare))
        outs[name] = run_bare()
        key = "graph_only" if name == "model" else f"graph_only_{name}"
        fns[f"eager_beside_{key}"], fns[key] = v.eager[name], run_bare
        bares[name] = bare
    timed = v.together(fns)
    for bare in bares.values():
        bare.release()
    return timed, bares, outs
