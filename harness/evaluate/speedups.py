"""A correct candidate's time and speedups, from the referee's paired rounds (referee.py), and the
roofline floor's verdict on that time."""

from __future__ import annotations

from harness.evaluate import verdict
from harness.evaluate.result import EvalResult
from harness.evaluate.roofline import floor_ms
from harness.evaluate.timing import Paired


def from_rounds(result: EvalResult, paired: Paired, asynchronous: bool) -> None:
    """The kernel's time (the paired rounds' second side) and its speedup over each baseline. Eager
    is timed beside the candidate; every other baseline keeps its ratio to eager from the reference
    worker, where they were timed together, so a drift of the host falls on neither."""
    timed = paired.second
    result.time_ms, result.time_p20_ms, result.time_p80_ms = timed.median_ms, timed.p20_ms, timed.p80_ms
    if not asynchronous:
        result.host_ms = timed.median_ms  # a call done when it returns: its host time is its time
    result.time_quantiles_ms = list(timed.quantiles_ms)
    eager_then = result.baselines.get("eager")
    result.baselines_reference = dict(result.baselines)
    result.baselines = {
        name: ms * paired.first.median_ms / eager_then if eager_then else ms for name, ms in result.baselines.items()
    }
    result.baselines["eager"] = paired.first.median_ms
    result.speedups = {name: ms / timed.median_ms for name, ms in result.baselines.items()}
    result.speedups["eager"] = paired.ratio
    if eager_then:
        for name, ms in result.baselines_reference.items():
            result.speedups[name] = paired.ratio * ms / eager_then
    result.speedup_vs_eager_p20, result.speedup_vs_eager_p80 = paired.ratio_p20, paired.ratio_p80
    result.speedup_vs_eager = result.speedups.get("eager")
    result.speedup_vs_compile = result.speedups.get("compile")
    if result.baselines:
        result.best_baseline = min(result.baselines, key=result.baselines.get)
        result.speedup_vs_best = result.speedups[result.best_baseline]


def floored(
    result: EvalResult, moved: int | None, flops: int | None, ceilings: dict | None, max_fraction: float
) -> None:
    """The share of the roofline floor the time reaches, and `rejected` below the floor (a task
    that states no bytes moved is floored by its inputs' and outputs' bytes: `moved`)."""
    floor = floor_ms(moved, flops, ceilings) if ceilings else None
    if not floor:
        return
    result.sol_fraction = floor / result.time_ms
    decided = verdict.of_floor(result.time_ms, floor, max_fraction)
    if decided is not None:
        result.verdict, result.reason = decided.verdict, decided.reason
