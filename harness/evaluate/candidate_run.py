"""The candidate's worker: its outputs on the check seeds, its time, and the checks that need its
process (inputs left alone, no PyTorch compute, no work outside the timer, plain outputs).

Every call of the candidate runs through `Watched`: the checked, timed and unseen calls are the
same calls, under the same dispatcher observer, with the same output check, so a forward that asks
whether it is watched learns nothing it could act on.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

import torch

from harness.devices import Device
from harness.devices.base import ProfilerFailure
from harness.evaluate import handover, integrity, observers, outputs, timing
from harness.evaluate.checks import OpRecorder, compare, forbidden_ops, mutated_inputs
from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
from harness.evaluate.reference_run import expected_outputs
from harness.evaluate.report import WorkerReport
from harness.evaluate.verdict import Verdict, shorten
from harness.platforms import build_cache

# The checks' own entry points, bound here at import, before any candidate loads; a candidate that
# rebinds the module names is caught by _changed, which it cannot rebind unnoticed (integrity.py).
_snapshot, _changed, _asked = integrity.snapshot, integrity.changed, observers.asked


class Watched:
    """The candidate's forward as every one of its calls runs: under the op recorder, its result
    checked to be plain tensors (outputs.not_plain), the first that is not remembered."""

    def __init__(self, model: torch.nn.Module):
        self.model, self.recorder, self.not_plain = model, OpRecorder(), None

    def __call__(self, *inputs: Any) -> Any:
        with self.recorder:
            out = self.model(*inputs)
        if self.not_plain is None:
            found = outputs.leaves(out)
            self.not_plain = found if isinstance(found, str) else None
        return out


# How far a call's GPU work on all streams may exceed its timed time before the difference is
# called hidden. The profiled calls find part of their inputs in the L2, which the timed calls
# flush, so honest work should only shrink there; the margin is wide until the ratio of honest
# candidates has been measured on a GPU (a side stream hid 90-99% of its work in the probe).
_HIDDEN_RATIO, _HIDDEN_SLACK_MS = 1.5, 0.010


def _unseen_calls(watched: Watched, ref_model, reference, request: dict, device: Device, working: list[Any]):
    """Calls on inputs drawn now from os.urandom (in the timed inputs' places), none of which the
    candidate can have seen or computed ahead, each output checked against the reference's here:
    the least busy time on all queues (Device.busy_ms), the kernels they ran, and the first
    mismatch (judged after the check seeds', whose reasons name their seed)."""
    profile = not request.get("profiler_failure")
    busy, kernels, first_mismatch = [], {}, None
    on = device.torch_device()
    for _ in range(request.get("unseen_calls", 0)):
        inputs = make_inputs(reference, int.from_bytes(os.urandom(4), "little"), on)
        timing.load_into(working, inputs)
        if not profile:
            out = watched(*working)
        else:
            try:
                out, ms, ran = device.busy_ms(watched, working)
            except ProfilerFailure as exc:
                raise Verdict(
                    "rejected",
                    f"the profiler works on this machine (the reference's worker tried it) but failed under the "
                    f"candidate ({exc}); the hidden-work check cannot be turned off",
                ) from exc
            if ms is not None:
                busy.append(ms)
            kernels.update(dict.fromkeys(ran))
        if first_mismatch is None:
            first_mismatch = _mismatch(ref_model, inputs, out, request, "an input drawn after timing")
    return (min(busy) if busy else None), list(kernels), first_mismatch


def _mismatch(ref_model, inputs: list[Any], out: Any, request: dict, where: str) -> str | None:
    """Why `out`, a candidate call's output on `inputs`, is wrong (checked here, against the
    reference run on the same inputs), naming the call; None when it is right."""
    got = outputs.keep(out)  # or why forward's result holds no plain tensors
    if isinstance(got, str):
        return f"{got} (on {where})"
    with torch.no_grad():
        expected = expected_outputs(ref_model, inputs, request)
    mismatch = compare(expected.outputs, got, request.get("tolerance"), expected.bounds)
    return f"{mismatch.reason} (on {where})" if mismatch else None


def _reject_replaced_clocks() -> None:
    replaced = timing.replaced_clocks()
    if replaced:
        raise Verdict(
            "rejected",
            f"the candidate replaced {', '.join(replaced)}; the harness's clocks are not the candidate's "
            "to change (it times with its own copies, bound before the candidate loaded)",
        )


def _skipped_checks(request: dict, device: Device) -> dict[str, str]:
    if not device.asynchronous:
        return {}
    if not request.get("unseen_calls"):
        return {"hidden_work": "evaluate.unseen_calls is 0"}
    if request.get("profiler_failure"):
        return {"hidden_work": f"the profiler does not work here ({request['profiler_failure']})"}
    return {}


def _hidden_work(busy_ms: float | None, event_ms: float) -> str | None:
    """Work the timed stream's events did not see: a side stream that forward joins back before it
    returns, but that never waited for the timed stream, starts during the L2 flush (or the GPU
    lead) queued ahead of the start event and hides its time (benchmarks/side_stream_probe.py: a
    178 µs matmul timed at 2.5 µs on the H200)."""
    if busy_ms is not None and busy_ms > _HIDDEN_RATIO * event_ms + _HIDDEN_SLACK_MS:
        return (
            f"a call keeps the GPU busy {busy_ms:.3g} ms on all its streams, but the timed stream saw only "
            f"{event_ms:.3g} ms: work on another stream that did not first wait for the current one "
            "(side.wait_stream(torch.cuda.current_stream())) ran outside the timer, which is not allowed"
        )
    return None


def _torch_compute(watched: Watched, kernels: list[str], request: dict, device: Device) -> list[str]:
    """The PyTorch computation the candidate ran: ATen compute ops that reached the dispatcher on any
    of its calls, and library kernels the profiler saw. Under evaluate.torch_ops=forbid any is a
    rejection; under allow they are listed, and a candidate that ran no code of its own is rejected."""
    used = [f"aten.{op}" for op in forbidden_ops(watched.recorder.ops)] + device.library_kernels(kernels)
    used += [symbol for symbol in device.library_symbols() if symbol not in used]
    if request.get("torch_ops", "forbid") == "forbid":
        if used:
            raise Verdict(
                "rejected",
                f"forward calls PyTorch compute ops ({', '.join(used[:5])}); the computation must be the "
                "candidate's own kernels (evaluate.torch_ops=forbid)",
            )
    elif not device.own_code(kernels):
        raise Verdict(
            "rejected",
            f"forward runs no kernel of its own, only PyTorch's ({', '.join(used[:5]) or 'none'}); under "
            "evaluate.torch_ops=allow a candidate may keep some PyTorch ops, not all",
        )
    return used


def _check_candidate(watched: Watched, reference, request: dict, on: torch.device) -> list[Any]:
    """Outputs on the check seeds; rejects input mutation."""
    kept = []
    for seed in request["check_seeds"]:
        inputs = make_inputs(reference, seed, on)
        before = timing.clone_inputs(inputs)
        kept.append(outputs.keep(watched(*inputs)))
        mutation = mutated_inputs(before, inputs)
        if mutation:
            raise Verdict("rejected", mutation)
    return kept


def run_candidate(request: dict, device: Device, reference) -> WorkerReport:
    on, phases, clock = device.torch_device(), {}, timing._perf_counter
    start = clock()  # on a GPU this includes the worker's CUDA start-up
    ref_model = build_model(reference.Model, reference, request["init_seed"], on)
    timing_sets = [make_inputs(reference, s, on) for s in request["timing_seeds"]]
    working = timing.clone_inputs(timing_sets[0])
    phases["inputs_s"] = clock() - start

    start = clock()
    if not request.get("profiler_failure"):
        device.warm_profiler()
    observers.install()  # before the candidate's code runs, so it can only reach the noting wrappers
    _snapshot()  # the harness as it is before the candidate's code runs (integrity.py)
    candidate = load_candidate(Path(request["candidate_path"]))
    phases["build_s"] = clock() - start
    notes: dict[str, str] = {}
    try:
        start = clock()
        model = build_model(candidate.ModelNew, reference, request["init_seed"], on)
        weights = copy_parameters(ref_model, model)
        if weights:
            notes["weights"] = weights
        watched = Watched(model)
        kept = _check_candidate(watched, reference, request, on)
        phases["check_s"] = clock() - start

        start = clock()
        timed_call: list = []
        measured = timing.measure(watched, timing_sets, device, working=working, kept=timed_call, **request["timing"])
        timed_mismatch = _mismatch(ref_model, *timed_call[0], request, "a timed call") if timed_call else None
        # The timed inputs' addresses, given the first check seed's contents: a result cached
        # during timing (by address or by a sample of the contents) shows here as a wrong output.
        timing.load_into(working, make_inputs(reference, request["check_seeds"][0], on))
        kept.append(outputs.keep(watched(*working)))
        busy_ms, kernels, unseen_mismatch = _unseen_calls(watched, ref_model, reference, request, device, working)
        unseen_mismatch = timed_mismatch or unseen_mismatch
        _reject_replaced_clocks()  # now, while a patch that blinded the profiler is still in place
        problem = _hidden_work(busy_ms, measured.median_ms) or device.escaped_work(watched, working, measured.median_ms)
        problem = problem or watched.not_plain or _asked() or _changed()
        if problem:
            raise Verdict("rejected", problem)
        used = _torch_compute(watched, kernels, request, device)
        _reject_replaced_clocks()
        phases["timing_s"] = clock() - start
    except Verdict:
        raise
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}"
        raise Verdict("runtime_error", shorten(reason)) from exc
    builds = build_cache.BUILDS
    report = WorkerReport(
        "correct",
        cached_build=bool(builds) and all(b.cached for b in builds),
        timing=measured,
        gpu_busy_ms=busy_ms,
        unseen_mismatch=unseen_mismatch,
        checks_skipped={**_skipped_checks(request, device), **notes},
        torch_ops=used,
        phases=phases,
    )
    if request.get("profile"):
        from harness.evaluate.profile import top_kernels

        start = clock()
        try:
            report.profile = top_kernels(watched.model, working, device)  # unwatched: the observer is no kernel
        except Exception as exc:  # advisory only: a profiler failure must not change the verdict
            report.profile = {"error": shorten(f"{type(exc).__name__}: {exc}", 500)}
        phases["profile_s"] = clock() - start
    start = clock()
    # Only the kept outputs are needed now. The allocator's cache of everything else (inputs, the
    # fp64 reference's outputs: over 100 GB on a 6 GB task) would leave the judge no device memory.
    del timing_sets, working, timed_call, ref_model
    device.empty_cache()
    folder = Path(request["outputs_path"]).parent
    if not (request.get("share_outputs") and handover.offer(kept, folder, device)):
        outputs.write(Path(request["outputs_path"]), kept)
    phases["save_s"] = clock() - start
    return report


def run_build(request: dict, device: Device, reference) -> WorkerReport:
    """Only the candidate's import, which builds its kernels into the shared caches (regrade builds
    many at once, then times them one at a time)."""
    observers.install()
    load_candidate(Path(request["candidate_path"]))
    return WorkerReport("correct", cached_build=bool(build_cache.BUILDS) and all(b.cached for b in build_cache.BUILDS))


def run_under_ncu(request: dict, device: Device, reference) -> WorkerReport:
    """A correct candidate's forward once more, for Nsight Compute (ncu.py): two calls to build and
    warm it up, then one inside the range ncu profiles. Nothing is timed or checked here."""
    from harness.evaluate.ncu import NVTX_RANGE

    on = device.torch_device()
    ref_model = build_model(reference.Model, reference, request["init_seed"], on)
    inputs = make_inputs(reference, request["check_seeds"][0], on)
    candidate = load_candidate(Path(request["candidate_path"]))
    model = build_model(candidate.ModelNew, reference, request["init_seed"], on)
    copy_parameters(ref_model, model)
    for _ in range(2):
        model(*inputs)
    with device.profiling_range(NVTX_RANGE):
        model(*inputs)
    return WorkerReport("profiled")
