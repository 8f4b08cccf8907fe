"""The capture manifest: what was captured, how it was timed, where the time goes, which tasks
cover it, and the command and environment that produced every number."""

from __future__ import annotations

import platform
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from harness import devices
from harness.capture import costs
from harness.capture.emit import returned_specs
from harness.capture.fusion import FusedGroup
from harness.capture.record import CallGroup

MANIFEST = "manifest.yaml"
_LIBRARIES = ("torchvision", "transformers", "diffusers")


@dataclass
class CaptureResult:
    """A finished capture: the groups with their times, and which became tasks."""

    model: str
    device: torch.device
    groups: list[CallGroup]
    calls: int
    fused: list[FusedGroup] = field(default_factory=list)
    tasks: dict[str, CallGroup] = field(default_factory=dict)  # task id -> group
    fused_tasks: dict[str, FusedGroup] = field(default_factory=dict)  # task id -> fused region
    skipped: list[tuple[CallGroup, str]] = field(default_factory=list)  # above threshold, not a task
    below_cut: list[CallGroup] = field(default_factory=list)  # the costliest groups past the cut (emit)
    cut: dict = field(default_factory=lambda: {"by": "last group", "drop": None})  # what ended the tasks (emit)
    model_time_ms: float | None = None

    @property
    def total_ms(self) -> float:
        return sum(g.total_ms for g in self.groups)

    def share(self, group: CallGroup | FusedGroup) -> float:
        return group.total_ms / self.total_ms if self.total_ms else 0.0

    @property
    def coverage(self) -> float:
        return sum(self.share(g) for g in self.tasks.values())


def environment(device: torch.device) -> dict:
    env = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "torch": str(torch.__version__),
    }
    if device.type == "meta":
        env["device"] = "meta (no device ran the model)"
        env["cpu_threads"] = torch.get_num_threads()
    else:
        adapter = devices.of(device)
        env["device"] = adapter.device_name()
        if adapter.asynchronous:
            env["cuda"] = str(torch.version.cuda)
        else:
            env["cpu_threads"] = torch.get_num_threads()
    env |= {name: str(sys.modules[name].__version__) for name in _LIBRARIES if name in sys.modules}
    return env


def _by_operator(result: CaptureResult) -> list[dict]:
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0, 0])
    for group in result.groups:
        entry = totals[group.name]
        entry[0] += result.share(group)
        entry[1] += 1
        entry[2] += group.count
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    return [{"operator": op, "time_share": round(s, 6), "groups": g, "calls": c} for op, (s, g, c) in ranked]


def manifest(
    result: CaptureResult, command: str, settings: dict, thresholds: tuple[float, float], timing: dict
) -> dict:
    min_share, coverage = thresholds
    device = result.device.type
    not_tasks = sum(result.share(g) for g in result.groups if g.why_not_task())
    return {
        "model": result.model,
        "command": command,
        "environment": environment(result.device),
        "timing": {
            "device": device,
            "shares_are": _shares_are(device),
            **timing,
        },
        "settings": settings,
        "total_time_ms": round(result.total_ms, 6),
        "model_time_ms": None if result.model_time_ms is None else round(result.model_time_ms, 6),
        "calls": result.calls,
        "groups": len(result.groups),
        "min_share": min_share,
        "coverage_target": coverage,
        "coverage": round(result.coverage, 6),  # single-call tasks only: fused ones overlap them
        "not_tasks_share": round(not_tasks, 6),
        "top_operators": _by_operator(result),
        "tasks": [
            {
                "id": task_id,
                "operator": g.name,
                "time_share": round(result.share(g), 6),
                "call_count": g.count,
                "time_ms": round(g.time_ms, 6),
                **({"times_ms": [round(t, 6) for t in g.times_ms]} if len(g.times_ms) > 1 else {}),
                "output_shapes": [list(o.shape) for o in costs.returned_outputs(g)],
            }
            for task_id, g in sorted(result.tasks.items(), key=lambda kv: -result.share(kv[1]))
        ],
        "fused_tasks": [
            {
                "id": task_id,
                "members": [str(m.op) for m in f.members],
                "time_share": round(result.share(f), 6),
                "call_count": f.count,
                "unfused_time_ms": round(f.time_ms or 0.0, 6),
                "output_shapes": [list(o.shape) for o in returned_specs(f)],
            }
            for task_id, f in sorted(result.fused_tasks.items(), key=lambda kv: -result.share(kv[1]))
        ],
        "cut": result.cut,
        # The costliest groups past the cut, so two captures' cuts can be compared group by group.
        "below_cut": [
            {
                "operator": g.name,
                "time_share": round(result.share(g), 6),
                "call_count": g.count,
                "output_shapes": [list(o.shape) for o in costs.returned_outputs(g)],
            }
            for g in result.below_cut
        ],
        "skipped": [
            {"operator": g.name, "time_share": round(result.share(g), 6), "why": why} for g, why in result.skipped
        ],
        "untimed": [{"operator": g.name, "call_count": g.count, "why": g.untimed} for g in result.groups if g.untimed],
    }


def _shares_are(device: str) -> str:
    if device == "meta":
        c = costs.ESTIMATE_CEILINGS
        return (
            "ESTIMATED, not timed: captured on meta tensors (shapes, no values), each call's time taken "
            f"as max(bytes / {c['copy_gbps']:g} GB/s, FLOPs / {c['bf16_tflops']:g} TFLOP/s), the H200's "
            "measured ceilings; inputs are drawn standard normal (integers 0), not from captured values"
        )
    return f"{'GPU' if device == 'cuda' else 'CPU'} time of each call replayed alone"


def previous_task_ids(folder: Path) -> list[str]:
    """Task ids a previous capture into this folder wrote (so a new capture can replace them)."""
    path = folder / MANIFEST
    if not path.is_file():
        return []
    data = yaml.safe_load(path.read_text()) or {}
    listed = [*data.get("tasks", []), *data.get("fused_tasks", [])]
    return [t["id"] for t in listed if isinstance(t, dict) and "id" in t]


def write_manifest(folder: Path, data: dict) -> Path:
    path = folder / MANIFEST
    header = "# Written by `forgebench capture`; the tasks beside it are this capture's, replaced by the next.\n"
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=10_000))
    return path
