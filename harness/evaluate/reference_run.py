"""The reference's worker: expected outputs with their bounds, every baseline's time, and the
device's ceilings when the parent has none cached; once per task, never near a candidate."""

from __future__ import annotations

from pathlib import Path

import torch

from harness.devices import Device
from harness.evaluate import baselines, outputs, timing, tolerance
from harness.evaluate.checks import compare
from harness.evaluate.models import build_model, make_inputs
from harness.evaluate.report import WorkerReport


def expected_outputs(model, inputs: list, request: dict) -> tolerance.Expected:
    """What a candidate's output on these inputs is compared with (tolerance.py)."""
    eager = outputs.keep(model(*inputs))
    if isinstance(eager, str):
        raise ValueError(f"the reference's {eager}")
    if request.get("tolerance_basis", "fp64") != "fp64":
        return tolerance.fixed(eager)
    return tolerance.derive(model, inputs, eager, request.get("tolerance"))


def _nbytes(values: list) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def run_reference(request: dict, device: Device, reference) -> WorkerReport:
    on = device.torch_device()
    clock, phases = timing._perf_counter, {}
    start = clock()
    model = build_model(reference.Model, reference, request["init_seed"], on)
    check_sets = [make_inputs(reference, s, on) for s in request["check_seeds"]]
    expected = [expected_outputs(model, inputs, request) for inputs in check_sets]
    outputs.write(Path(request["outputs_path"]), [e.outputs for e in expected])
    outputs.write(Path(request["bounds_path"]), [e.bounds if e.bounds is not None else "fixed" for e in expected])
    phases["outputs_s"] = clock() - start
    # Baselines are built from the first check seed's inputs and checked on the last, so a
    # baseline that kept something computed from its sample inputs shows as a mismatch.
    sample = baselines.Sample(model, check_sets[0], on)

    def check(fn) -> str | None:
        last = expected[-1]
        # On copies: a library kernel that works in place (FlashInfer's fused_add_rmsnorm) must not
        # change the inputs the next baseline is checked on.
        got = outputs.keep(fn(*timing.clone_inputs(check_sets[-1])))
        mismatch = compare(last.outputs, got, request.get("tolerance"), last.bounds)
        return mismatch.reason if mismatch else None

    start = clock()
    timing_sets = [make_inputs(reference, s, on) for s in request["timing_seeds"]]
    times = baselines.measure_all(request["baselines"], sample, check, timing_sets, request["baseline_timing"])
    phases["baselines_s"] = clock() - start
    report = WorkerReport(
        "correct",
        baselines=times.ms,
        baselines_skipped=times.skipped,
        baselines_setup_s=times.setup_s,
        baselines_host_ms=times.host_ms,
        phases=phases,
        tolerance=[e.basis for e in expected],
        io_bytes=_nbytes(check_sets[0]) + _nbytes(expected[0].outputs),
    )
    if request.get("measure_ceilings"):
        from harness.evaluate.roofline import measure_ceilings

        start = clock()
        report.ceilings = measure_ceilings(device)
        phases["ceilings_s"] = clock() - start
    # Tried here, where no candidate runs, and last (CUPTI may stay attached): a profiler that
    # works here and fails under a candidate is the candidate's doing (session_run._second_line).
    report.profiler_failure = device.profiler_failure()
    return report
