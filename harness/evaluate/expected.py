"""What a task's trusted reference worker leaves for the evaluator to judge its candidates by: the
expected outputs and each element's bound, in a folder no worker can enter once written, and its
report (the baselines, the device's ceilings, the bases of the bounds)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.evaluate.report import WorkerReport


@dataclass
class Expected:
    outputs_path: Path  # expected outputs, in a folder no worker can enter once written
    bounds_path: Path  # each expected output's per-element bound (tolerance.py), beside it
    report: WorkerReport  # the reference worker's: baselines by name, ceilings, bases of the bounds
    degenerate: str | None = None  # why a constant would pass across the check seeds (checks.near_constant)

    def fields(self) -> dict:
        """The baselines' part of every EvalResult of the task, whatever its verdict."""
        r = self.report
        return {
            "baselines": dict(r.baselines),
            "baselines_skipped": dict(r.baselines_skipped),
            "baselines_setup_s": dict(r.baselines_setup_s),
            "baselines_host_ms": dict(r.baselines_host_ms),
            "tolerance": r.tolerance[0] if r.tolerance else {},
        }


def discard(path: Path) -> None:
    """Delete a worker's outputs file; a candidate may have made it a folder, which is left be."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
