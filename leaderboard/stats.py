"""The leaderboard's statistics over a run's tasks: geomeans, fast_p, bootstrap intervals, paired ratios."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

RESAMPLES = 2000
SEED = 0  # fixed, so the same records always give the same table


def geomean(values: ArrayLike) -> float:
    """Geometric mean of the values that are there; NaN when none are (a run without a correct
    task has no speedup to average, which is not the same as a speedup of 1)."""
    logs = np.log(np.asarray(values, dtype=float))
    logs = logs[~np.isnan(logs)]
    return float(np.exp(logs.mean())) if logs.size else math.nan


def guarded(speedup: ArrayLike, correct: ArrayLike) -> np.ndarray:
    """What a guard that falls back to PyTorch delivers per task: the kernel's speedup when it is
    correct and faster, else 1.0."""
    speedup, correct = np.asarray(speedup, dtype=float), np.asarray(correct, dtype=bool)
    return np.where(correct & (speedup > 1.0), speedup, 1.0)


def fast_p(speedup: ArrayLike, correct: ArrayLike, p: float) -> float:
    """KernelBench's fast_p: the share of all tasks whose kernel is correct and more than p times
    faster than eager. A speedup is positive, so fast_0 is the share correct."""
    speedup, correct = np.asarray(speedup, dtype=float), np.asarray(correct, dtype=bool)
    return float((correct & (speedup > p)).mean()) if correct.size else math.nan


def bootstrap_geomean(
    values: ArrayLike, resamples: int = RESAMPLES, seed: int = SEED, level: float = 0.95
) -> tuple[float, float]:
    """A percentile bootstrap interval for the geomean: the tasks resampled with replacement."""
    logs = np.log(np.asarray(values, dtype=float))
    if not logs.size:
        return math.nan, math.nan
    picks = np.random.default_rng(seed).integers(0, logs.size, size=(resamples, logs.size))
    low, high = np.quantile(logs[picks].mean(axis=1), [(1 - level) / 2, (1 + level) / 2])
    return float(np.exp(low)), float(np.exp(high))


def paired_ratio(
    a: ArrayLike, b: ArrayLike, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float, float]:
    """The geomean of b/a over paired tasks, with its 95% bootstrap interval (pairs resampled
    together, so a task's difficulty cancels out): (ratio, low, high)."""
    ratios = np.asarray(b, dtype=float) / np.asarray(a, dtype=float)
    return (geomean(ratios), *bootstrap_geomean(ratios, resamples, seed))
