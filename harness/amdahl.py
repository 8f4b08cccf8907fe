"""Amdahl's law over shares of a model's time: the one prediction of what kernels do to a model,
made by `forgebench e2e` (over the kernels that ran in the patched model) and by the leaderboard
(over a suite run's kernels and the capture's shares). Imports only the standard library, so both
may read it."""

from __future__ import annotations

import math


def predicted_speedup(shares_and_speedups: list[tuple[float, float | None]]) -> float:
    """Amdahl's law: the model's speedup if each replaced share of its time ran that much faster.
    NaN where the time saved is the whole model's or more: shares scaled to a mode much faster than
    the capture (share_in_mode) can sum past 1, and Amdahl then has no answer."""
    saved = sum(share * (1 - 1 / speedup) for share, speedup in shares_and_speedups if speedup and speedup > 0)
    return 1 / (1 - saved) if saved < 1 else math.nan


def realization(measured: float | None, predicted: float | None) -> float | None:
    """The measured gain over the predicted one: (measured - 1) / (predicted - 1); None where
    Amdahl predicts no gain worth the name (under 0.5%), or none at all (NaN)."""
    if measured is None or predicted is None or not predicted >= 1.005:
        return None
    return (measured - 1) / (predicted - 1)


def share_in_mode(share: float, scale: float = 1.0) -> float:
    """A share of eager's time as a share of a mode's: the mode's whole is `scale` (eager over the
    mode alone) times smaller, and the op is taken to cost in the mode what it cost in the capture
    (docs/e2e-modes.md, "Realization")."""
    return min(1.0, scale * share)
