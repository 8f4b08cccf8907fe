"""Capture: profile a real model at the ATen level and turn the calls that take its time into tasks.

record (one forward under a dispatch mode, identical calls grouped) -> replay (each group timed
alone on fresh inputs) -> emit (a task folder per group above the share threshold) -> manifest.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from harness import devices
from harness.capture import costs
from harness.capture.emit import write_fused_task, write_task
from harness.capture.fusion import EPILOGUES, NORM_CHAINS, FusionTracker
from harness.capture.manifest import CaptureResult, manifest, previous_task_ids, write_manifest
from harness.capture.record import CallRecorder
from harness.capture.replay import ReplaySettings, time_groups_in_processes, time_workload
from harness.capture.sources import Workload
from harness.errors import ForgeBenchError
from harness.evaluate.timing import L2_FLUSH


def record_and_time(
    workload: Workload, device: torch.device, settings: ReplaySettings, progress: Callable[[str], None]
) -> CaptureResult:
    """Run one recorded forward, then time every group and (unrecorded) the whole forward."""
    # cuDNN's heuristic picks a different convolution algorithm from run to run, which moved a
    # ResNet-50 conv's share by 46% between two captures; timing the choices, as servers do, does not.
    torch.backends.cudnn.benchmark = True
    with torch.no_grad():
        progress(f"recording one forward of {workload.name} on {device}")
        trackers = tuple(FusionTracker(costs.category, rule) for rule in (NORM_CHAINS, EPILOGUES))
        with CallRecorder(trackers) as recorder:
            workload.run()
        groups = sorted(recorder.groups.values(), key=lambda g: g.name)
        fused = [f for tracker in trackers for f in tracker.groups.values()]
        progress(f"{recorder.calls} calls in {len(groups)} groups; {len(fused)} fused regions")
        if device.type == "meta":  # shapes without values: nothing to time, so each call is estimated
            for group in groups:
                group.time_ms = costs.estimated_ms(group)
            model_ms = None
        else:
            time_groups_in_processes(groups, device, settings, progress)
            model_ms = time_workload(workload.run, device, settings)
    return CaptureResult(workload.name, device, groups, recorder.calls, fused=fused, model_time_ms=model_ms)


# Once the coverage target is met, the cut goes on to the first group this much below the one
# before it (past_cut): the default of `forgebench capture --cut-gap`.
CUT_GAP = 0.15


def past_cut(share: float, previous: float | None, covered: bool, cut_gap: float | None) -> bool:
    """Whether the cut falls before a group with `share` (groups go costliest first; `previous` is the
    share of the one before it). Without `cut_gap`, as soon as the tasks cover the target. With it,
    at the first group after that whose share is more than `cut_gap` below the one before: shares
    move a few percent between captures, and a cut between two groups that close would take one in
    one capture and the other in the next."""
    if not covered:
        return False
    return cut_gap is None or previous is None or share < (1.0 - cut_gap) * previous


def emit(
    result: CaptureResult, folder: Path, min_share: float, coverage: float, cut_gap: float | None = CUT_GAP
) -> None:
    """Replace the folder's previous capture: a task per group, costliest first, until the tasks
    cover `coverage` of the time (see past_cut) while the group has at least `min_share` of it;
    then a fused task per fused region with at least `min_share`."""
    for old in previous_task_ids(folder):
        if (folder / old / "task.yaml").is_file():
            shutil.rmtree(folder / old)
    device = result.device.type
    previous = None
    ordered = sorted(result.groups, key=lambda g: -g.total_ms)
    for at, group in enumerate(ordered):
        share = result.share(group)
        floor = share < min_share or share == 0.0
        if floor or past_cut(share, previous, result.coverage >= coverage, cut_gap):
            result.below_cut = [g for g in ordered[at:] if result.share(g) > 0.0 and not g.why_not_task()][:8]
            # What set the cut, and how far the first group left out falls below the last one taken:
            # a cut on the floor between near-equal groups may fall elsewhere in the next capture.
            drop = round(1.0 - share / previous, 4) if previous else None
            result.cut = {"by": "min_share" if floor else "gap" if cut_gap else "coverage", "drop": drop}
            break
        previous = share
        why = group.why_not_task()
        if why:
            result.skipped.append((group, why))
            continue
        try:
            result.tasks[write_task(folder, result.model, group, share, device)] = group
        except ForgeBenchError as exc:
            result.skipped.append((group, str(exc)))
    for fused in sorted(result.fused, key=lambda f: -f.total_ms):
        share = result.share(fused)
        if share < min_share or share == 0.0:
            break
        try:
            result.fused_tasks[write_fused_task(folder, result.model, fused, share, device)] = fused
        except ForgeBenchError as exc:
            result.skipped.append((fused.last, f"fused region: {exc}"))


def capture(
    workload: Workload,
    device: torch.device,
    out: Path,
    min_share: float,
    coverage: float,
    settings: ReplaySettings,
    command: str,
    progress: Callable[[str], None] = lambda _: None,
    cut_gap: float | None = CUT_GAP,
) -> tuple[CaptureResult, Path]:
    """Capture a workload into out/<model>/: task folders and manifest.yaml."""
    if not 0.0 < min_share < 1.0:
        raise ForgeBenchError(f"--min-share {min_share} is outside (0, 1); give a share such as 0.001.")
    if not 0.0 < coverage <= 1.0:
        raise ForgeBenchError(f"--coverage {coverage} is outside (0, 1]; give a share of time such as 0.9.")
    if cut_gap is not None and not 0.0 <= cut_gap < 1.0:
        raise ForgeBenchError(f"--cut-gap {cut_gap} is outside [0, 1); give a relative drop such as 0.15.")
    cut_gap = cut_gap or None  # 0: no gap rule
    result = record_and_time(workload, device, settings, progress)
    if not result.total_ms:
        reasons = {g.untimed for g in result.groups if g.untimed} or {"the forward made no ATen call"}
        raise ForgeBenchError(f"capture of {workload.name}: no call could be replayed and timed ({min(reasons)}).")
    folder = out / workload.name
    folder.mkdir(parents=True, exist_ok=True)
    emit(result, folder, min_share, coverage, cut_gap)
    timing = {"budget_ms": settings.budget_ms, "warmup_ms": settings.warmup_ms, "input_sets": settings.input_sets}
    timing["processes"] = settings.processes
    timing["across_processes"] = "fastest"  # replay.time_groups_in_processes (before 2026-11-30: median)
    timing["cudnn_benchmark"] = torch.backends.cudnn.benchmark
    # before each replayed call, on a device whose cache the harness flushes
    timing["l2_flush"] = L2_FLUSH if device.type != "meta" and devices.of(device).asynchronous else None
    path = write_manifest(folder, manifest(result, command, workload.settings, (min_share, coverage), timing))
    return result, path
