"""The guard: which kernels go into the model, decided by evidence from the model itself.

For each kernel: the real activations of every subgraph matching its task are recorded in one
forward with the workload's inputs (the graph pass in recording mode); the kernel is checked on
each against the task's own calls' output with the task's tolerance, then timed against those
calls on them. It is kept only when it is right on every
recorded call and faster in place than the op by more than the timing spread (its 80th percentile
below the op's 20th). Each decision says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from harness.evaluate import timing
from harness.evaluate.checks import compare, mutated_inputs
from harness.evaluate.timing import clone_inputs
from harness.integrate.e2e_record import Decision, GuardDecision
from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.traced import Traced


def record(model: Traced, run: Callable[[Any], Any], kernels: list[Kernel]) -> tuple[dict, dict, Counter]:
    """The model's own activations for each kernel: the inputs and the task's own output of every
    subgraph matching its task (up to eight), from one forward run by the graph pass in
    recording mode. A kernel whose calls lie inside a longer chain another kernel took is
    recorded again in a pass of its own, so each is judged on its own calls. Also, for each task,
    how many calls at its signature the forward made (Patch.sites)."""
    recorded, left_open, sites = _recording(model, run, kernels)
    shadowed = [k for k in kernels if not recorded[k.task_id]]
    if shadowed and len(shadowed) < len(kernels):
        again, why, _ = _recording(model, run, shadowed)
        recorded.update(again)
        left_open.update(why)
    return recorded, left_open, sites


def _recording(model: Traced, run, kernels: list[Kernel]) -> tuple[dict, dict, Counter]:
    """({task id: recorded calls}, {task id: why its calls were found and could not be replaced},
    {task id: calls at its signature})."""
    patch = Patch(kernels, record=True)
    with torch.no_grad():
        run(model.using(patch))
    patch.release()
    return patch.recorded, patch.left_open, patch.sites()


def check(kernel: Kernel, calls: list[tuple[list, torch.Tensor]], tolerance: dict) -> Decision | None:
    """incorrect_in_model when the kernel is wrong on a recorded call, raises, or writes into its
    inputs (a residual stream read again later would see the change); else None."""
    for i, (inputs, expected) in enumerate(calls):
        before = clone_inputs(inputs)
        try:
            got = kernel.module(*inputs)
        except Exception as exc:
            reason = f"it raised on the model's call {i + 1}: {type(exc).__name__}: {exc}"[:400]
            return Decision(kernel.task_id, GuardDecision.INCORRECT_IN_MODEL, reason, i + 1)
        mismatch = compare(expected, got, tolerance)
        changed = mutated_inputs(before, inputs)
        if mismatch or changed:
            why = mismatch.reason if mismatch else changed
            reason = f"wrong on the model's own activations (call {i + 1} of {len(calls)}): {why}"
            return Decision(kernel.task_id, GuardDecision.INCORRECT_IN_MODEL, reason[:600], i + 1)
    return None


def confirm(
    model: Traced, run, kept: list[Kernel], decisions: list[Decision], tolerance: dict[str, dict]
) -> list[Kernel]:
    """The kept kernels checked again on the calls they get with only each other in place (a kernel
    judged where a longer chain took some of its calls gets those calls once the chain is out), until
    no decision changes; the kernels still kept."""
    by_id = {d.task_id: d for d in decisions}
    for _ in range(len(kept)):
        recorded, _, _ = _recording(model, run, kept)
        dropped = []
        for kernel in kept:
            wrong = check(kernel, recorded[kernel.task_id], tolerance.get(kernel.task_id) or {})
            if wrong:
                decision = by_id[kernel.task_id]
                decision.decision, decision.reason = (
                    wrong.decision,
                    "with the other kept kernels in place, " + wrong.reason,
                )
                dropped.append(kernel)
        if not dropped:
            break
        kept = [k for k in kept if k not in dropped]
    return kept


def decide(
    kernel: Kernel,
    calls: list[tuple[list, torch.Tensor]],
    tolerance: dict,
    device,
    budget_ms: float,
    left_open: str | None = None,
) -> Decision:
    if not calls and left_open:
        return Decision(kernel.task_id, GuardDecision.NOT_INTEGRABLE, left_open)
    if not calls:
        reason = "the model made no calls matching its task's, at the shapes, dtypes and layouts it was captured at"
        return Decision(kernel.task_id, GuardDecision.NEVER_CALLED, reason)
    wrong = check(kernel, calls, tolerance)
    if wrong:
        return wrong
    inputs = calls[0][0]
    # No GPU lead: in the model a kernel's host time is paid too (the whole model is timed alike).
    settings = {"budget_ms": budget_ms, "warmup_ms": budget_ms / 5}
    direct = kernel.call.module()
    op = direct if direct is not None else (lambda *x: kernel.call.replay(list(x)))
    # Side by side: timed a second apart, a host that drifts would decide it (timing.measure_together).
    together = timing.measure_together({"op": op, "kernel": kernel.module}, [inputs], device, **settings)
    op_t, kernel_t = together["op"], together["kernel"]
    decision = Decision(
        kernel.task_id,
        GuardDecision.KEPT,
        calls_checked=len(calls),
        op_ms=op_t.median_ms,
        kernel_ms=kernel_t.median_ms,
        in_place_speedup=op_t.median_ms / kernel_t.median_ms,
        figures={
            "op_p20_ms": op_t.p20_ms,
            "op_p80_ms": op_t.p80_ms,
            "kernel_p20_ms": kernel_t.p20_ms,
            "kernel_p80_ms": kernel_t.p80_ms,
            "op_host_ms": op_t.host_ms,
            "kernel_host_ms": kernel_t.host_ms,
        },
    )
    if not kernel_t.p80_ms < op_t.p20_ms:
        decision.decision = GuardDecision.SLOWER_IN_PLACE
        decision.reason = (
            f"in place it takes {kernel_t.median_ms:.4g} ms (p80 {kernel_t.p80_ms:.4g}) against the task's calls' "
            f"{op_t.median_ms:.4g} ms (p20 {op_t.p20_ms:.4g}): not faster by more than the timing spread"
        )
    return decision


def versus(a: dict, b: dict) -> str:
    """faster, slower, or a tie: whether a's timed spread (p20-p80) lies wholly below or above b's."""
    if a["p80_ms"] < b["p20_ms"]:
        return "faster"
    return "slower" if a["p20_ms"] > b["p80_ms"] else "tie"


class Run(NamedTuple):
    """One phase of one patched forward: its pass (None for a phase got by difference), its output,
    the calls each kernel took in one forward, its timing, and eager's of the same phase timed
    beside it (timing.measure_together), which it is weighed against."""

    patch: Any
    output: Any
    hits: dict
    timing: dict
    eager: dict


def difference(whole: dict, part: dict) -> dict:
    """The timing of what `whole` does beyond `part` (an LLM's decode steps: the request less its
    prefill), its spread the widest the two spreads allow."""
    return {
        "median_ms": whole["median_ms"] - part["median_ms"],
        "p20_ms": whole["p20_ms"] - part["p80_ms"],
        "p80_ms": whole["p80_ms"] - part["p20_ms"],
    }


def _no_gain(run: Run) -> bool:
    """Whether a phase is held to be slower with the kernels. Kernels are optional and the model
    as it is the safe default, so doubt goes against them: a phase timed on its own pass (the
    whole forward, an LLM's prefill) where a kernel ran must not be slower at the median, spreads
    or not (ResNet-50 on the H200's drifting host: 0.89x at the median, a tie by the
    spreads); a phase got by difference (a decode step: two timings of 100 ms each,
    less each other) only beyond the spreads."""
    if versus(run.timing, run.eager) == "slower":
        return True
    # Where no kernel ran, the phase is the graph pass alone: its small cost, within the spreads,
    # is no reason to drop kernels that gain elsewhere (a decode step's, for a prefill).
    ran = any(run.hits.values())
    return ran and run.patch is not None and run.timing["median_ms"] > run.eager["median_ms"]


def settle(
    kept: list[Kernel],
    decisions: list[Decision],
    patched: Callable[[list[Kernel]], dict[str, Run]],
    confirm: Callable[[list[Kernel]], list[Kernel]],
    baseline: str = "eager",
) -> tuple[list[Kernel], dict[str, Run]]:
    """The kept kernels no phase of the model is slower with, and the last patched runs.
    `patched(kernels)` gives a Run of each phase the model is reported by (the whole forward; an
    LLM's prefill and decode steps too), each with eager's timing of that phase beside it. The
    guard's promise holds for every phase, not only for each kernel in place: a model whose host
    issues its calls no faster than the GPU runs them can be slower with kernels that are each
    faster alone (a kernel's launch costs more host time than the library call it replaces). While a
    phase is slower than eager's (_no_gain), the kernel that ran in it and saved the least in place
    goes (its decision becomes slower_in_model), and the rest are confirmed and timed again. A
    slower phase that ran no kernel is the graph pass's own cost: the kernels that ran elsewhere
    all go, and the model runs as it is. With no kernel that ran left, what is slower is the graph
    pass itself. In another execution mode (modes.py) each Run holds that mode with no kernel as
    `eager`, and `baseline` names it in the reasons."""
    by_id = {d.task_id: d for d in decisions}
    runs = patched(kept)

    def ran(hits: dict) -> list[Kernel]:
        return [k for k in kept if hits.get(k.task_id)]

    while True:
        slower = [name for name, run in runs.items() if _no_gain(run)]
        anywhere = {k.task_id: k for name in runs for k in ran(runs[name].hits)}
        if not slower or not anywhere:
            return kept, runs
        name = slower[0]
        hits, timing = runs[name].hits, runs[name].timing
        took = f"with it and {len(kept) - 1} other kept kernels in place the {name} took {timing['median_ms']:.4g} ms"
        base = runs[name].eager
        against = (
            f"(p20 {timing['p20_ms']:.4g}) against {baseline}'s {base['median_ms']:.4g} ms (p80 {base['p80_ms']:.4g})"
        )
        if not ran(hits):
            going = list(anywhere.values())
            for k in going:
                by_id[k.task_id].decision = GuardDecision.SLOWER_IN_MODEL
                by_id[k.task_id].reason = (
                    f"{took} {against}, and ran no kernel there: the graph pass alone made it slower, so every "
                    "kernel went and the model runs as it is"
                )
        else:

            def saving(k: Kernel, hits=hits) -> float:  # ms a forward, by the in-place timings
                d = by_id[k.task_id]
                return ((d.op_ms or 0.0) - (d.kernel_ms or 0.0)) * hits.get(k.task_id, 0)

            going = [min(ran(hits), key=saving)]
            by_id[going[0].task_id].decision = GuardDecision.SLOWER_IN_MODEL
            by_id[going[0].task_id].reason = (
                f"{took} {against}; it saved the least there in place ({saving(going[0]) * 1e3:.3g} us a forward), "
                "so it went first"
            )
        gone = {k.task_id for k in going}
        kept = confirm([k for k in kept if k.task_id not in gone])
        runs = patched(kept)
