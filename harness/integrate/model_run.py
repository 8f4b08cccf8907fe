"""The model run of `forgebench e2e`, in a process of its own: the kernels are a model's code, so
they run with a scrubbed environment (no API key reaches them), away from the records.

    python -m harness.integrate.model_run REQUEST.json

Builds the workload as capture built it, puts each task's kernel through the guard (guard.py), then
weighs the kept kernels in each execution mode asked for (eager: weighing.py; CUDA graphs and
torch.compile: modes.py), times the graph pass alone (its overhead), checks the patched model's
output against eager's, and writes what it found (an E2EResult, e2e_record.py) to the request's
result_path. Imports neither MLflow nor litellm.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness import devices, serial
from harness.amdahl import predicted_speedup, share_in_mode
from harness.capture.builtin import PrefillThenDecode
from harness.errors import ForgeBenchError
from harness.evaluate import timing
from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
from harness.evaluate.verdict import Verdict
from harness.integrate import guard, modes
from harness.integrate.agreement import agreement
from harness.integrate.e2e_record import (
    Decision,
    E2EResult,
    GuardDecision,
    KernelFigures,
    Mode,
    ModeResult,
)
from harness.integrate.graph_patch import Kernel
from harness.integrate.phases import Phases
from harness.integrate.signature import NotIntegrable, task_call
from harness.integrate.traced import Traced
from harness.integrate.weighing import EagerWeighing, Variants, graph_only
from harness.reference import load_reference_module

__all__ = ["ModelRun", "agreement", "main", "predicted_speedup", "run"]


def workload(spec: str, device: torch.device, overrides: list[str]):
    from harness.capture.sources import from_builtin, from_factory

    if ":" in spec:
        return from_factory(spec, None, device, None)
    return from_builtin(spec, device, None, overrides)


def load_kernel(task: dict, device: torch.device) -> Kernel | Decision:
    """The task's kernel beside its call, or the decision that it cannot go in."""
    reference = load_reference_module(Path(task["reference_path"]), f"e2e_reference_{task['id']}")
    inputs = make_inputs(reference, 0, device)
    try:
        call = task_call(reference, inputs)
    except NotIntegrable as exc:
        return Decision(task["id"], GuardDecision.NOT_INTEGRABLE, str(exc))
    try:
        candidate = load_candidate(Path(task["kernel_path"]))
        module = build_model(candidate.ModelNew, reference, 0, device)
        copy_parameters(build_model(reference.Model, reference, 0, device), module)
    except (Verdict, Exception) as exc:
        reason = exc.reason if isinstance(exc, Verdict) else f"{type(exc).__name__}: {exc}"
        return Decision(task["id"], GuardDecision.FAILED_TO_LOAD, reason[:400])
    return Kernel(task["id"], call, module)


class _Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _timing_fields(t: timing.Timing) -> dict:
    return {"median_ms": t.median_ms, "p20_ms": t.p20_ms, "p80_ms": t.p80_ms, "runs": t.runs, "host_ms": t.host_ms}


class ModelRun:
    """One model run, a method per phase, each filling fields of `result`."""

    def __init__(self, request: dict):
        self.request, self.phase = request, Phases(request["result_path"])
        self.device = torch.device(request["device"])
        self.adapter = devices.of(self.device)
        self.tasks = {t["id"]: t for t in request["tasks"]}
        self.tolerances = {t["id"]: t.get("tolerance") or {} for t in request["tasks"]}
        self.result = E2EResult()
        self.decisions: list[Decision] = []

    def partial(self) -> dict:
        return serial.to_dict(self.result)

    def calling(self, model):
        inputs = self.work.inputs
        return (lambda: model(**inputs)) if isinstance(inputs, dict) else (lambda: model(*inputs))

    def forward(self, compiled):
        """One forward of the workload through a compiled model."""
        return self.calling(compiled)()

    def together(self, fns: dict) -> dict[str, dict]:
        """Forwards timed side by side (timing.measure_together): on a host shared with other work,
        each variant's time is comparable only with those timed beside it. No GPU lead: a model's
        host time (the interposer's included) is part of its time, as it serves."""
        budget = self.request["budget_ms"]
        found = timing.measure_together(fns, [[]], self.adapter, budget_ms=budget, warmup_ms=budget / 5)
        return {name: _timing_fields(t) for name, t in found.items()}

    def build(self) -> list[Kernel]:
        timing.bind_clocks(self.adapter)
        torch.set_grad_enabled(False)
        torch.backends.cudnn.benchmark = True  # as the capture timed the model, and the evaluator its baselines
        self.phase(f"building {self.request['model']} on {self.device}")
        self.work = workload(self.request["model"], self.device, self.request.get("overrides", []))
        kernels = []
        for task in self.request["tasks"]:
            loaded = load_kernel(task, self.device)
            (self.decisions if isinstance(loaded, Decision) else kernels).append(loaded)
        return kernels

    def record_and_decide(self, kernels: list[Kernel]) -> list[Kernel]:
        """One trace; the model's activations recorded; each kernel checked and timed in place;
        the kept ones confirmed together. The kernels every mode starts from."""
        self.model = Traced(self.work.model, reuse_blocks=self.request.get("reuse_blocks", True))
        self.result.traced_as = self.model.traced_as
        self.phase(f"tracing the model ({self.model.traced_as}); recording its activations for {len(kernels)} kernels")
        try:
            recorded, left_open, self.sites = guard.record(self.model, self.forward, kernels)
        except ForgeBenchError:
            raise
        except Exception as exc:  # the recording pass runs the task's own calls: no kernel is to blame
            raise ForgeBenchError(
                f"the model's traced graph fails on {self.device} where eager runs ({type(exc).__name__}: "
                f"{str(exc)[:200]}), before any kernel ran, so no kernel can go in. torch.compile(model, "
                "backend='aot_eager') shows whether torch's own trace fails the same way; try another device or "
                "torch version."
            ) from exc
        self.phase(f"traced into {len(self.model.graphs)} graphs; checking and timing each kernel in place")
        kept = []
        for kernel in kernels:
            decision = guard.decide(
                kernel,
                recorded[kernel.task_id],
                self.tolerances[kernel.task_id],
                self.adapter,
                self.request["kernel_budget_ms"],
                left_open.get(kernel.task_id),
            )
            self.decisions.append(decision)
            if decision.kept:
                kept.append(kernel)
        self.phase(f"checking the {len(kept)} kept kernels together")
        return self.confirm(kept)

    def confirm(self, kernels: list[Kernel]) -> list[Kernel]:
        return guard.confirm(self.model, self.forward, kernels, self.decisions, self.tolerances)

    def variants(self) -> Variants:
        """The phases the model is reported by, each traced once: the whole forward, and an LLM's
        prefill alone (its decode steps are the difference)."""
        traced, eager = {"model": self.model}, {"model": self.work.run}
        llm = isinstance(self.work.model, PrefillThenDecode) and self.work.model.decode_steps > 0
        if llm:
            prefill = PrefillThenDecode(self.work.model.lm, 0)
            self.result.decode_steps = self.work.model.decode_steps
            eager["prefill"] = self.calling(prefill)
            traced["prefill"] = Traced(prefill, reuse_blocks=self.request.get("reuse_blocks", True))
        return Variants(traced, eager, self.calling, self.together, llm, self.phase, self.partial)

    def eager_mode(self, candidates: list[Kernel]) -> EagerWeighing:
        """The guard in eager mode, each phase held to eager's time (weighing.py)."""
        counter = _Counter()
        with counter:
            self.work.run()
        self.eager_out = self.work.run()
        self.result.aten_calls_per_forward = counter.calls
        self.phase("timing the model with the kept kernels", self.partial())
        v = self.variants()
        weighing = EagerWeighing(v, self.decisions, self.confirm)
        kept, runs = weighing.settle(list(candidates))
        r, (patch, patched_out, hits) = self.result, runs["model"][:3]
        r.settling, r.hits_per_forward, r.unmatched_calls = v.settling, hits, patch.unmatched
        if not any(hits.values()):  # no kernel left to put in: a user runs the model as it is
            r.patched_is_eager, patched_out = True, self.eager_out
            runs = {name: guard.Run(None, None, {}, run.eager, run.eager) for name, run in runs.items()}
        r.timings["eager"], r.timings["patched_eager"] = runs["model"].eager, runs["model"].timing
        r.phases_vs_eager = {name: guard.versus(run.timing, run.eager) for name, run in runs.items()}
        if v.llm:
            r.timings["eager_prefill"], r.timings["patched_prefill"] = runs["prefill"].eager, runs["prefill"].timing
        self.in_model = weighing.in_model(kept, hits) if not r.patched_is_eager else {}
        self.phase("timed the patched model; timing the graph pass alone", self.partial())
        timed, bares, outs = graph_only(v)
        r.timings.update(timed)
        r.graph_only_agreement = agreement(self.eager_out, outs["model"])
        r.graph_calls_per_forward = bares["model"].graph_calls
        r.reinplace_error = bares["model"].reinplace_error or patch.reinplace_error
        found = agreement(self.eager_out, patched_out)
        for key in ("tokens_match", "max_output_error", "mean_output_error", "output_mismatch"):
            setattr(r, key, found.get(key))
        r.patched_vs_eager = guard.versus(r.timings["patched_eager"], r.timings["eager"])
        r.fallbacks, r.fallback_errors = dict(patch.fallbacks), dict(patch.errors)
        r.patch_overhead_ms_per_forward = (
            r.timings["graph_only"]["median_ms"] - (r.timings["eager_beside_graph_only"]["median_ms"])
        )
        r.patch_overhead_us_per_call = 1e3 * r.patch_overhead_ms_per_forward / max(counter.calls, 1)
        self.amdahl()
        r.modes[Mode.EAGER.value] = ModeResult(
            Mode.EAGER,
            kept=[d.task_id for d in self.decisions if d.kept and hits.get(d.task_id)],
            decisions={d.task_id: d.decision for d in self.decisions},
            timings={"eager": r.timings["eager"], "base": r.timings["eager"], "patched": r.timings["patched_eager"]},
            hits_per_forward={k: n for k, n in hits.items() if n},
            versus_base=r.patched_vs_eager,
            predicted_speedup=r.predicted_speedup,
            agreement=found,
        )
        return weighing

    def shares(self, hits: dict[str, int], scale: float = 1.0) -> dict[str, float]:
        """Each kernel that ran: its task's captured share of the model's time, at the fraction of
        the calls at its signature it took (counted in this workload: a changed one, fewer layers or
        steps, makes fewer calls than the capture's call_count). `scale`: a mode's time is a
        smaller whole (the share of an op whose time the mode leaves alone grows by eager/mode)."""
        taken = {tid: min(1.0, n / max(self.sites[tid], 1)) for tid, n in hits.items() if n and tid in self.tasks}
        return {
            tid: share_in_mode((self.tasks[tid].get("time_share") or 0.0) * part, scale) for tid, part in taken.items()
        }

    def isolated(self, task_id: str) -> float | None:
        """The suite's speedup; a kernel given with --kernel has none: its in-place one stands in."""
        by_id = {d.task_id: d for d in self.decisions}
        return self.tasks[task_id].get("isolated_speedup") or by_id[task_id].in_place_speedup

    def amdahl(self) -> None:
        """Amdahl over the kernels that ran in the patched forward: a kept kernel whose calls a longer
        chain took replaces nothing, and counting both would count that time twice."""
        r, by_id = self.result, {d.task_id: d for d in self.decisions}
        share = self.shares({tid: n for tid, n in r.hits_per_forward.items() if by_id[tid].kept})
        r.calls_at_signature_per_forward = dict(self.sites)
        r.predicted_speedup = predicted_speedup([(s, self.isolated(t)) for t, s in share.items()])
        r.predicted_speedup_in_place = predicted_speedup([(s, by_id[t].in_place_speedup) for t, s in share.items()])
        r.share_of_time_replaced = sum(share.values())

    def other_modes(self, asked: list[Mode], candidates: list[Kernel]) -> None:
        """Each mode beyond eager, weighed from the kernels confirmed in place (modes.py). CUDA
        graphs first: they run over the one trace, which torch.compile's reset would drop."""
        for mode in sorted((m for m in asked if m is not Mode.EAGER), key=lambda m: m in modes.COMPILED):
            why = modes.unavailable(mode, self.adapter)
            if why:
                self.result.modes[mode.value] = ModeResult(mode, refused=why)
                continue
            if mode in modes.COMPILED:
                torch._dynamo.reset()
            self.phase(f"weighing the kernels under {mode.value}", self.partial())
            runners = modes.Runners(mode, self.work.model, self.model, self.calling, candidates)
            weigh = modes.ModeWeighing(runners, self.work.run, self.together, agreement, self.phase)
            # Both compilations stay, to be timed side by side: Dynamo counts them against one limit.
            with torch._dynamo.config.patch(recompile_limit=max(64, torch._dynamo.config.recompile_limit)):
                found = weigh.weigh(self.decisions)
            if not found.refused:
                found.agreement = agreement(self.eager_out, weigh.last["out"]) if found.kept else {}
                scale = self.mode_scale(found)
                found.predicted_speedup = predicted_speedup(
                    [(s, self.isolated(t)) for t, s in self.shares(found.hits_per_forward, scale).items()]
                )
            self.result.modes[mode.value] = found

    def mode_scale(self, found: ModeResult) -> float:
        """How much larger a captured share is in the mode: the capture's forward time over the mode's
        own (each op taken to cost there what it cost captured, docs/e2e-modes.md "Realization").
        Eager over the mode where the capture's time is unknown: eager's wall time counts its host
        time, which the GPU's shares do not, and which drifts with the host's load."""
        captured, base = self.request.get("captured_ms"), (found.timings.get("base") or {}).get("median_ms")
        if captured and base:
            return captured / base
        return found.base_vs_eager or 1.0

    def kernel_figures(self) -> None:
        """Per kernel, isolated, in-place and in-model speedups side by side, and the modes it went in."""
        for d in self.decisions:
            if d.in_place_speedup is None and d.task_id not in self.in_model:
                continue
            own = self.in_model.get(d.task_id) or KernelFigures(d.task_id)
            own.isolated_speedup = self.tasks[d.task_id].get("isolated_speedup")
            own.in_place_speedup = d.in_place_speedup
            own.kept_in = [m.mode for m in self.result.modes.values() if d.task_id in m.kept]
            self.result.kernels.append(own)

    def run(self) -> E2EResult:
        kernels = self.build()
        candidates = self.record_and_decide(kernels)
        asked = [Mode(m) for m in self.request.get("modes", [m.value for m in modes.supported(self.adapter)])]
        if not self.request.get("compile", True):
            asked = [m for m in asked if m not in modes.COMPILED]
        self.eager_mode(candidates)
        self.other_modes(asked, candidates)
        self.kernel_figures()
        r = self.result
        r.decisions, r.phases = self.decisions, self.phase.seen
        r.env, r.driver = self.adapter.environment(), self.adapter.driver()
        return r


def run(request: dict) -> dict:
    """The model run of `request`, as the plain data e2e.json holds."""
    return serial.to_dict(ModelRun(request).run())


def main(path: str) -> int:
    request = json.loads(Path(path).read_text())
    found: dict[str, Any]
    try:
        found = run(request)
    except Exception as exc:
        found = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=-6)}
    Path(request["result_path"]).write_text(json.dumps(found, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
