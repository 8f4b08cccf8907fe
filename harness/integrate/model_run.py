"""The model run of `forgebench e2e`, in a process of its own: the kernels are a model's code, so
they run with a scrubbed environment (no API key reaches them), away from the records.

    python -m harness.integrate.model_run REQUEST.json

Builds the workload as capture built it, puts each task's kernel through the guard (guard.py),
then times the whole model (eager; torch.compile; the kept kernels in place by the graph pass,
graph_patch.py, run as FX code and under Inductor; the same graph pass with no kernel, its
overhead), checks the patched model's output against eager's,
and writes what it found to the request's result_path. Imports neither MLflow nor litellm.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from harness import devices
from harness.capture.builtin import PrefillThenDecode
from harness.errors import ForgeBenchError
from harness.evaluate import timing
from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
from harness.evaluate.verdict import Verdict
from harness.integrate import guard
from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.signature import NotIntegrable, task_call
from harness.integrate.traced import Traced
from harness.reference import load_reference_module


def workload(spec: str, device: torch.device, overrides: list[str]):
    from harness.capture.sources import from_builtin, from_factory

    if ":" in spec:
        return from_factory(spec, None, device, None)
    return from_builtin(spec, device, None, overrides)


def load_kernel(task: dict, device: torch.device) -> Kernel | guard.Decision:
    """The task's kernel beside its call, or the decision that it cannot go in."""
    reference = load_reference_module(Path(task["reference_path"]), f"e2e_reference_{task['id']}")
    inputs = make_inputs(reference, 0, device)
    try:
        call = task_call(reference, inputs)
    except NotIntegrable as exc:
        return guard.Decision(task["id"], "not_integrable", str(exc))
    try:
        candidate = load_candidate(Path(task["kernel_path"]))
        module = build_model(candidate.ModelNew, reference, 0, device)
        copy_parameters(build_model(reference.Model, reference, 0, device), module)
    except (Verdict, Exception) as exc:
        reason = exc.reason if isinstance(exc, Verdict) else f"{type(exc).__name__}: {exc}"
        return guard.Decision(task["id"], "failed_to_load", reason[:400])
    return Kernel(task["id"], call, module)


class _Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _floats(out: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def agreement(eager: Any, patched: Any) -> dict:
    """Max and mean absolute error of the patched model's outputs against eager's; for integer
    outputs (an LLM's tokens) whether they are all the same."""
    errors, tokens = [], []
    if len(_floats(eager)) != len(_floats(patched)):
        return {"tokens_match": None, "output_mismatch": "the patched model returns another number of tensors"}
    for a, b in zip(_floats(eager), _floats(patched)):
        if a.shape != b.shape:
            found_shape = f"an output of shape {tuple(b.shape)} where eager's is {tuple(a.shape)}"
            return {"tokens_match": False if not a.is_floating_point() else None, "output_mismatch": found_shape}
        if a.is_floating_point():
            a, b = a.double(), b.double()
            same = (a == b) | (a.isnan() & b.isnan())  # equal infinities and NaNs in both are no error
            errors.append(torch.where(same, torch.zeros_like(a), (a - b).abs()))
        else:
            tokens.append(bool(torch.equal(a, b)))
    found: dict[str, Any] = {"tokens_match": all(tokens) if tokens else None}
    if errors:
        found["max_output_error"] = (
            max(float(e.max()) for e in errors if e.numel()) if any(e.numel() for e in errors) else 0.0
        )
        found["mean_output_error"] = float(torch.cat([e.reshape(-1) for e in errors]).mean())
    return found


def predicted_speedup(shares_and_speedups: list[tuple[float, float]]) -> float:
    """Amdahl's law: the model's speedup if each replaced share of its time ran that much faster."""
    saved = sum(share * (1 - 1 / speedup) for share, speedup in shares_and_speedups if speedup > 0)
    return 1 / (1 - saved)


class _Phases:
    """What the run is doing, on stderr as it goes (a big model's run takes minutes), and what it
    has measured so far beside the result path, so a run stopped by its timeout still tells."""

    def __init__(self, result_path: str):
        self.partial, self.started = Path(result_path).with_suffix(".partial.json"), time.monotonic()
        self.seen: list[str] = []  # each phase with the second it began: where a stopped run's time went
        self.partial.unlink(missing_ok=True)  # an earlier run's, in the same folder

    def __call__(self, what: str, found: dict | None = None) -> None:
        self.seen.append(f"+{time.monotonic() - self.started:.0f} s {what}")
        print(f"[e2e] {self.seen[-1]}", file=sys.stderr, flush=True)
        if found is not None:  # written whole or not at all: a kill mid-write leaves the last one
            written = self.partial.with_suffix(".tmp")
            written.write_text(json.dumps({**found, "reached": what, "phases": self.seen}, indent=1, default=str))
            os.replace(written, self.partial)


def compiled(work, kept: list[Kernel], calling, together, eager_out, phase, found: dict) -> None:
    """torch.compile of the model, and of the model with the kept kernels in place (each an opaque
    op to Inductor), timed side by side with eager into found; where Inductor fails, why."""
    torch._dynamo.reset()
    phase("compiling the model with torch.compile", found)
    runs = {"eager": work.run}
    # Both compilations stay, to be timed side by side. Dynamo's guards tell their backends apart,
    # but it counts both against one limit of compilations a frame (as an LLM's decode steps
    # count theirs), past which it would run a frame eagerly without a word.
    limit = max(64, torch._dynamo.config.recompile_limit)
    with torch._dynamo.config.patch(recompile_limit=limit):
        try:
            runs["compile"] = calling(torch.compile(work.model))
            runs["compile"]()
        except Exception as exc:  # a model Inductor cannot compile here: said, and the rest stands
            found["compile_error"] = f"{type(exc).__name__}: {exc}"[:400]
            return
        if kept:  # the kernels in place and Inductor around them: each kernel an opaque op to it
            try:
                compiled_patch = Patch(kept)
                run_both = calling(compiled_patch.compile(work.model, inductor=True))
                both_out = run_both()
                found["patched_compile_hits_per_forward"] = dict(compiled_patch.hits)
                found["patched_compile_agreement"] = agreement(eager_out, both_out)
                runs["patched_compile"] = run_both
            except Exception as exc:  # Inductor and the kernels do not compose on this model: said
                found["patched_compile_error"] = f"{type(exc).__name__}: {exc}"[:400]
        try:
            timed = together(runs)
        except Exception as exc:  # out of memory with every variant alive, say: said, and the rest stands
            found["compile_error"] = f"while timing: {type(exc).__name__}: {exc}"[:400]
            return
    found["timings"]["compile"], found["timings"]["eager_beside_compile"] = timed["compile"], timed["eager"]
    if "patched_compile" in timed:
        found["timings"]["patched_compile"] = timed["patched_compile"]
        found["timings"]["eager_beside_patched_compile"] = timed["eager"]
        # Inductor fuses much of what the kernels replace, and cannot fuse across them: with
        # them it can be slower than alone (ResNet-50 on the H200, fifteenth session).
        found["patched_compile_vs_compile"] = guard.versus(timed["patched_compile"], timed["compile"])
    phase("timed torch.compile", found)


def run(request: dict) -> dict:
    phase = _Phases(request["result_path"])
    device = torch.device(request["device"])
    adapter = devices.of(device)
    timing.bind_clocks(adapter)
    torch.set_grad_enabled(False)
    torch.backends.cudnn.benchmark = True  # as the capture timed the model, and the evaluator its baselines
    phase(f"building {request['model']} on {device}")
    work = workload(request["model"], device, request.get("overrides", []))
    decisions: list[guard.Decision] = []
    kernels: list[Kernel] = []
    for task in request["tasks"]:
        loaded = load_kernel(task, device)
        (decisions if isinstance(loaded, guard.Decision) else kernels).append(loaded)

    def calling(model):
        inputs = work.inputs
        return (lambda: model(**inputs)) if isinstance(inputs, dict) else (lambda: model(*inputs))

    def forward(compiled):  # one forward of the workload through a compiled model
        return calling(compiled)()

    # One trace of the model serves every pass below that runs as FX code.
    model = Traced(work.model)
    phase(f"tracing the model; recording its activations for {len(kernels)} kernels")
    try:
        recorded, left_open, sites = guard.record(model, forward, kernels)
    except ForgeBenchError:
        raise
    except Exception as exc:  # the recording pass runs the task's own calls: no kernel is to blame
        raise ForgeBenchError(
            f"the model's traced graph fails on {device} where eager runs ({type(exc).__name__}: {str(exc)[:200]}), "
            "before any kernel ran, so no kernel can go in. torch.compile(model, backend='aot_eager') shows whether "
            "torch's own trace fails the same way; try another device or torch version."
        ) from exc
    phase(f"traced into {len(model.graphs)} graphs; checking and timing each kernel in place")
    by_id = {t["id"]: t for t in request["tasks"]}
    kept = []
    for kernel in kernels:
        tolerance = by_id[kernel.task_id].get("tolerance") or {}
        calls = recorded[kernel.task_id]
        why = left_open.get(kernel.task_id)
        decision = guard.decide(kernel, calls, tolerance, adapter, request["kernel_budget_ms"], why)
        decisions.append(decision)
        if decision.kept:
            kept.append(kernel)
    tolerances = {t["id"]: t.get("tolerance") or {} for t in request["tasks"]}
    phase(f"checking the {len(kept)} kept kernels together")
    kept = guard.confirm(model, forward, kept, decisions, tolerances)

    # No GPU lead: a model's host time (the interposer's included) is part of its time, as it serves.
    def together(fns: dict) -> dict[str, dict]:
        """Forwards timed side by side (timing.measure_together): on a host shared with other work,
        each variant's time is comparable only with those timed beside it."""
        found_t = timing.measure_together(
            fns, [[]], adapter, budget_ms=request["budget_ms"], warmup_ms=request["budget_ms"] / 5
        )
        return {
            name: {
                "median_ms": t.median_ms,
                "p20_ms": t.p20_ms,
                "p80_ms": t.p80_ms,
                "runs": t.runs,
                "host_ms": t.host_ms,
            }
            for name, t in found_t.items()
        }

    counter = _Counter()
    with counter:
        work.run()
    eager_out = work.run()
    found: dict[str, Any] = {"aten_calls_per_forward": counter.calls, "timings": {}}
    phase("timing the model with the kept kernels", found)

    # The phases the model is reported by, each traced once: the whole forward, and an LLM's
    # prefill alone (its decode steps are the difference). The guard holds each to eager's time.
    traced, eager = {"model": model}, {"model": work.run}
    llm = isinstance(work.model, PrefillThenDecode) and work.model.decode_steps > 0
    if llm:
        prefill = PrefillThenDecode(work.model.lm, 0)
        found["decode_steps"] = work.model.decode_steps
        eager["prefill"], traced["prefill"] = calling(prefill), Traced(prefill)
    # The last pass over each phase's graph, and the kernels it put in. A smaller kept set is weighed
    # on it with the rest switched off (a pass over an LLM's graph takes a minute on the GPU's host);
    # the set the guard settles on then gets a pass of its own, and is timed, and settled, again.
    passed: dict[str, tuple] = {}
    passed_ids: set[str] = set()

    def release() -> None:  # an earlier kept set's graphs: settle timed them and moved on
        for earlier, _ in passed.values():
            earlier.release()
        passed.clear()

    def patched(kernels: list[Kernel]) -> dict[str, guard.Run]:
        nonlocal passed_ids
        ids = {k.task_id for k in kernels}
        if not passed or not ids <= passed_ids:
            release()
            phase(f"passing the graph with {len(kernels)} kept kernels in place", found)
            for name, each in traced.items():
                patch = Patch(kernels)
                passed[name] = (patch, calling(each.using(patch)))
            passed_ids = ids
        phase(f"timing the model with {len(kernels)} kept kernels in place", found)
        outs, fns = {}, {}
        for name, (patch, run_patched) in passed.items():
            patch.off, patch.hits = passed_ids - ids, Counter()
            outs[name] = (run_patched(), dict(patch.hits))  # hits: one forward's
            fns[f"eager {name}"], fns[f"patched {name}"] = eager[name], run_patched
        timed = together(fns)  # every phase at one moment: a decode step is their difference
        runs = {
            name: guard.Run(passed[name][0], out, hits, timed[f"patched {name}"], timed[f"eager {name}"])
            for name, (out, hits) in outs.items()
        }
        if llm:
            whole, prefill = runs["model"], runs["prefill"]
            hits = Counter(whole.hits) - Counter(prefill.hits)
            by_difference = [
                guard.difference(a, b) for a, b in ((whole.timing, prefill.timing), (whole.eager, prefill.eager))
            ]
            runs["decode"] = guard.Run(None, None, dict(hits), *by_difference)
        # Each kept set the guard weighed, and what it decided so far: a run its timeout stops still tells.
        weighed = {name: {"patched": run.timing, "eager": run.eager} for name, run in runs.items()}
        found.setdefault("settling", []).append(
            {"kernels": sorted(ids), "switched_off": sorted(passed_ids - ids), **weighed}
        )
        found["decisions"] = [asdict(d) for d in decisions]
        return runs

    def confirm(kernels: list[Kernel]) -> list[Kernel]:
        return guard.confirm(model, forward, kernels, decisions, tolerances)

    while True:
        kept, runs = guard.settle(kept, decisions, patched, confirm)
        if {k.task_id for k in kept} == passed_ids or not any(runs["model"].hits.values()):
            break  # timed on a pass of just these kernels, or no kernel ran: the model runs as it is
        release()  # a pass of the settled set alone, timed and settled again
    patch, patched_out, hits = runs["model"][:3]
    found["hits_per_forward"] = hits
    found["unmatched_calls"] = patch.unmatched
    if not any(hits.values()):
        # No kernel left to put in: a user installs nothing, and runs the model as it is.
        found["patched_is_eager"] = True
        patched_out = eager_out
        runs = {name: guard.Run(None, None, {}, run.eager, run.eager) for name, run in runs.items()}
    found["timings"]["eager"], found["timings"]["patched_eager"] = runs["model"].eager, runs["model"].timing
    found["phases_vs_eager"] = {name: guard.versus(run.timing, run.eager) for name, run in runs.items()}
    if llm:
        found["timings"]["eager_prefill"] = runs["prefill"].eager
        found["timings"]["patched_prefill"] = runs["prefill"].timing
    phase("timed the patched model; timing the graph pass alone", found)
    # The same graph pass with no kernel: what running the graph as FX code costs, and whether the
    # traced graph alone computes what eager does (a model may take other paths when traced).
    bares, fns = [], {}
    for name, each in traced.items():
        bare = Patch([])
        run_bare = calling(each.using(bare))
        bare_out = run_bare()
        key = "graph_only" if name == "model" else f"graph_only_{name}"
        if name == "model":
            found["graph_only_agreement"] = agreement(eager_out, bare_out)
            found["graph_calls_per_forward"] = bare.graph_calls
            found["reinplace_error"] = bare.reinplace_error or patch.reinplace_error
        fns[f"eager_beside_{key}"], fns[key] = eager[name], run_bare
        bares.append(bare)
    found["timings"].update(together(fns))
    for bare in bares:
        bare.release()
    if request.get("compile", True):
        compiled(work, kept, calling, together, eager_out, phase, found)
    found.update(agreement(eager_out, patched_out))
    found["patched_vs_eager"] = guard.versus(found["timings"]["patched_eager"], found["timings"]["eager"])
    found["fallbacks"], found["fallback_errors"] = dict(patch.fallbacks), dict(patch.errors)
    overhead_ms = found["timings"]["graph_only"]["median_ms"] - found["timings"]["eager_beside_graph_only"]["median_ms"]
    found["patch_overhead_ms_per_forward"] = overhead_ms
    found["patch_overhead_us_per_call"] = 1e3 * overhead_ms / max(counter.calls, 1)
    # Amdahl over the kernels that ran in the patched forward: a kept kernel whose calls a longer
    # chain took replaces nothing, and counting both would count that time twice. A kernel given
    # with --kernel has no isolated speedup from the suite: its in-place one stands in.
    ran = [d for d in decisions if d.kept and found["hits_per_forward"].get(d.task_id)]
    # A task's share covers all its calls: a kernel that took some of them saves on those only.
    # Counted in this workload (a changed one, fewer layers or steps, makes fewer calls than the
    # capture's call_count), so the prediction is the captured workload's at the same fraction.
    found["calls_at_signature_per_forward"] = dict(sites)
    share = {
        d.task_id: (by_id[d.task_id].get("time_share") or 0.0)
        * min(1.0, found["hits_per_forward"][d.task_id] / max(sites.get(d.task_id) or 1, 1))
        for d in ran
    }
    isolated = [(share[d.task_id], by_id[d.task_id].get("isolated_speedup") or d.in_place_speedup) for d in ran]
    found["predicted_speedup"] = predicted_speedup(isolated)
    found["predicted_speedup_in_place"] = predicted_speedup([(share[d.task_id], d.in_place_speedup) for d in ran])
    found["share_of_time_replaced"] = sum(share.values())
    found["decisions"] = [asdict(d) for d in decisions]
    found["phases"] = phase.seen
    found["env"], found["driver"] = adapter.environment(), adapter.driver()
    return found


def main(path: str) -> int:
    request = json.loads(Path(path).read_text())
    try:
        found = run(request)
    except Exception as exc:
        found = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=-6)}
    Path(request["result_path"]).write_text(json.dumps(found, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
