"""The one timing module: warm-up, rotating fresh inputs, cache flush, median of a time budget.

Imported by the worker before any candidate code loads, so the clocks below are bound to the
real functions even if a candidate later patches `time` or `torch.cuda.Event`.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

_perf_counter = time.perf_counter
_CudaEvent = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize

# Larger than any current GPU's L2 (H200: 60 MB), so a write of it evicts the previous call's data.
_L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    runs: int

    def to_dict(self) -> dict[str, float]:
        return {"median_ms": self.median_ms, "p20_ms": self.p20_ms, "p80_ms": self.p80_ms, "runs": self.runs}


def _quantile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def _time_cpu(call: Callable[[int], object], runs: int) -> list[float]:
    samples = []
    for i in range(runs):
        start = _perf_counter()
        call(i)
        samples.append((_perf_counter() - start) * 1e3)
    return samples


def _time_cuda(call: Callable[[int], object], runs: int, device: torch.device) -> list[float]:
    flush = torch.empty(_L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    pairs = []
    for i in range(runs):
        flush.zero_()
        start, end = _CudaEvent(enable_timing=True), _CudaEvent(enable_timing=True)
        start.record()
        call(i)
        end.record()
        pairs.append((start, end))
    # Synchronising the whole device (not a stream) also waits for side-stream work a call left running.
    _cuda_synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


def measure(
    fn: Callable[..., object],
    input_sets: Sequence[Sequence[object]],
    device: torch.device,
    budget_ms: float = 500.0,
    warmup_ms: float = 50.0,
    min_runs: int = 5,
    max_runs: int = 1000,
) -> Timing:
    """Median time of fn(*inputs) over enough calls to fill budget_ms, cycling the input sets."""
    if not input_sets:
        raise ValueError("measure needs at least one input set")

    def call(i: int) -> object:
        return fn(*input_sets[i % len(input_sets)])

    def run(n: int) -> list[float]:
        samples = _time_cuda(call, n, device) if device.type == "cuda" else _time_cpu(call, n)
        return samples

    first = run(1)[0]  # the first call also pays lazy initialisation: never counted
    estimate = max(first, 1e-3)
    run(max(1, min(max_runs, int(warmup_ms / estimate))))
    estimate = max(statistics.median(run(3)), 1e-3)
    runs = max(min_runs, min(max_runs, int(budget_ms / estimate)))
    samples = sorted(run(runs))
    return Timing(statistics.median(samples), _quantile(samples, 0.2), _quantile(samples, 0.8), runs)
