"""What runs in the candidate's worker besides the refereed calls (session_run.serve_candidate): the
second line of checks that need its process (no PyTorch compute, clocks and harness left alone,
plain outputs), which can reject a candidate and never vouch for one; a build alone (regrade); and
the forward under Nsight Compute (ncu.py).

`Watched` is the candidate's forward under the dispatcher's op recorder, as the second line runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from harness.devices import Device
from harness.evaluate import integrity, observers, outputs, timing
from harness.evaluate.checks import OpRecorder, forbidden_ops
from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
from harness.evaluate.report import WorkerReport
from harness.evaluate.verdict import Verdict
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


def _reject_replaced_clocks() -> None:
    replaced = timing.replaced_clocks()
    if replaced:
        raise Verdict(
            "rejected",
            f"the candidate replaced {', '.join(replaced)}; the harness's clocks are not the candidate's "
            "to change (it times with its own copies, bound before the candidate loaded)",
        )


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
