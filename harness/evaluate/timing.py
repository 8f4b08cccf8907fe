"""The one timing module: warm-up, fresh input contents before every call, cache flush, events,
and the median of enough calls to fill a time budget.

What differs between devices (events or the host's clock, the flush buffer, the GPU's lead) is
the Device adapter's (harness/devices). Imported by the worker before any candidate code loads, so
the clocks below are bound to the real functions even if a candidate later patches `time`.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from harness import devices
from harness.devices import Device
from harness.evaluate import outputs

_perf_counter = time.perf_counter
# The L2 flush's own methods: a candidate that patches Tensor.sum must not skip the flush.
_tensor_view, _tensor_sum, _tensor_zero = torch.Tensor.view, torch.Tensor.sum, torch.Tensor.zero_

# Clocks a candidate might replace to fool a timer that reads them after it loads; each device
# adds its own (Device.watched).
_WATCHED = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.time",
    "time.process_time",
    "time.sleep",
    "torch.Tensor.view",
    "torch.Tensor.sum",
    "torch.Tensor.zero_",
)


def _resolve(path: str) -> object:
    head, *rest = path.split(".")
    value: object = {"time": time, "torch": torch}[head]
    for name in rest:
        value = getattr(value, name, None)
    return value


_BOUND: dict[str, object] = {path: _resolve(path) for path in _WATCHED}


def bind_clocks(device: Device) -> None:
    """Remember the clocks as they are now, before any candidate code loads."""
    for path in (*_WATCHED, *device.watched):
        _BOUND.setdefault(path, _resolve(path))


def replaced_clocks() -> list[str]:
    """The clocks and timer functions that no longer are what they were when bind_clocks ran."""
    return [path for path, value in _BOUND.items() if _resolve(path) is not value]


L2_FLUSH = "read"  # how measure empties the L2 before each call (flush_l2); manifests record it


def flush_l2(buffer: torch.Tensor, mode: str = L2_FLUSH) -> None:
    """Evict the L2 by a pass over `buffer` (uint8, a multiple of 8 bytes). "read" leaves it
    holding clean lines; "write" (a memset, as triton.testing.do_bench does) leaves it full of
    dirty lines, whose write-back then shares DRAM bandwidth with the next timed kernel and slows a
    small memory-bound one (10-13% on 4-50 MB copies on the H200, docs/results.md)."""
    if mode == "write":
        _tensor_zero(buffer)
    elif mode == "read":
        _tensor_sum(_tensor_view(buffer, torch.int64))
    else:
        raise ValueError(f"L2 flush mode {mode!r}: give 'read' or 'write'")


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    runs: int
    # Median host time of one call, from entering fn to its return. On a GPU, a call whose host
    # time is near or above its event time was timed waiting for the host, not for its kernels.
    host_ms: float | None = None
    lead_ms: float = 0.0  # how long the GPU waited before each start event (measure's gpu_lead)
    quantiles_ms: tuple[float, ...] = ()  # QUANTILES evenly spaced points of the timed calls, least first


def _raw(t: torch.Tensor) -> torch.Tensor:
    """The 1-D span of storage a tensor's elements live in (a broadcast input's is small)."""
    extent = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride())) if t.numel() else 0
    return t.as_strided((extent,), (1,), t.storage_offset())


def _clone_layout(t: torch.Tensor) -> torch.Tensor:
    """A copy with the same sizes and strides, so broadcast, transposed and sliced inputs keep the
    layout the task gives them (clone() would make them contiguous)."""
    raw = _raw(t)
    return raw.clone().as_strided(t.shape, t.stride())


def clone_inputs(inputs: Sequence[Any]) -> list[Any]:
    return [_clone_layout(v) if isinstance(v, torch.Tensor) else v for v in inputs]


def load_into(working: Sequence[Any], source: Sequence[Any], roll: int = 0) -> None:
    """Write source's contents into the working inputs, keeping their addresses and layout, with
    the storage rotated by `roll` elements: the same values in new places, so no two calls see
    the same contents."""
    for w, s in zip(working, source):
        if not isinstance(w, torch.Tensor):
            continue
        if w.stride() != s.stride() or w.shape != s.shape:
            w.copy_(s)
            continue
        raw_w, raw_s = _raw(w), _raw(s)
        k = roll % raw_w.numel() if raw_w.numel() else 0
        raw_w[: raw_w.numel() - k].copy_(raw_s[k:])
        raw_w[raw_w.numel() - k :].copy_(raw_s[:k])


class _Runner:
    """Calls fn on the working inputs, refreshed before every call from the next input set rotated
    by a random number of elements, so a result cached by address or by a sample of the contents
    never hits, and no call's contents follow from the last one's by a shift it could look for.

    One timed call, chosen at random, is kept: its inputs and output, copied once the timer has
    stopped, for the caller to check (a forward that can tell timed calls apart and skips work in
    them is wrong there)."""

    def __init__(
        self,
        fn: Callable[..., object],
        input_sets: Sequence[Sequence[Any]],
        working: list[Any],
        device: Device,
        flush: str = L2_FLUSH,
    ):
        self.fn, self.input_sets, self.working, self.device, self.flush_mode = fn, input_sets, working, device, flush
        self.calls = 0
        self.host_ms: list[float] = []  # each call's host time, from the last run
        self.lead_cycles = 0  # device cycles spun before each start event
        self.flush = device.flush_buffer()
        self.keep_call: int | None = None  # the call (by count) whose inputs and output are kept
        self.kept: tuple[list[Any], Any] | None = None
        self._last: Any = None

    def _keep_last(self) -> None:
        if self.keep_call is not None and self.calls == self.keep_call and self.kept is None:
            self.kept = (clone_inputs(self.working), outputs.keep(self._last))

    def _prepare(self) -> None:
        self._keep_last()  # the previous call's, before its inputs are overwritten
        roll = int.from_bytes(os.urandom(4), "little")
        load_into(self.working, self.input_sets[self.calls % len(self.input_sets)], roll=roll)
        self.calls += 1
        if self.flush is not None:
            flush_l2(self.flush, self.flush_mode)

    def _call(self) -> Any:
        self._last = self.fn(*self.working)
        return self._last

    def run(self, n: int) -> list[float]:
        times, self.host_ms = self.device.time_calls(self._prepare, self._call, n, self.lead_cycles)
        self._keep_last()
        self._last = None
        return times


def measure(
    fn: Callable[..., object],
    input_sets: Sequence[Sequence[Any]],
    device: Device | torch.device,
    budget_ms: float = 500.0,
    warmup_ms: float = 50.0,
    min_runs: int = 5,
    max_runs: int = 1000,
    working: list[Any] | None = None,
    gpu_lead: bool = False,
    flush: str = L2_FLUSH,
    kept: list | None = None,
) -> Timing:
    """Median time of fn over enough calls to fill budget_ms; inputs live in `working` (a clone of
    the first set unless given) and take the next set's contents before each call.

    With `gpu_lead`, on a GPU, the stream spins before each start event for a little longer than a
    call takes the host to issue, so the call's launches are queued before the GPU reaches the event
    and the events time the call's GPU work, as in a model whose host runs ahead; without it, a call
    whose host time exceeds its kernels' time is timed at its host time. Host time beyond
    _MAX_LEAD_MS still counts. `flush` is how the L2 is emptied before each call (see flush_l2).
    Given `kept`, one timed call's (inputs, output) are appended to it."""
    if not input_sets:
        raise ValueError("measure needs at least one input set")
    device = devices.of(device)
    runner = _Runner(fn, input_sets, working if working is not None else clone_inputs(input_sets[0]), device, flush)
    estimate = _warmed(runner, warmup_ms, max_runs)
    lead_ms = 0.0
    if gpu_lead and device.asynchronous:
        lead_ms = min(_MAX_LEAD_MS, 1.25 * statistics.median(runner.host_ms) + 0.01)
        runner.lead_cycles = int(lead_ms * device.cycles_per_ms())
    runs = max(min_runs, min(max_runs, int(budget_ms / estimate)))
    if kept is not None:  # one of the timed calls, at random, kept for the caller to check
        runner.keep_call = runner.calls + 1 + int.from_bytes(os.urandom(4), "little") % runs
    samples = runner.run(runs)
    if kept is not None and runner.kept is not None:
        kept.append(runner.kept)
    return _timing(runner, samples, runner.host_ms, lead_ms, _host_calls(budget_ms, estimate))


def measure_together(
    fns: dict[str, Callable[..., object]],
    input_sets: Sequence[Sequence[Any]],
    device: Device | torch.device,
    budget_ms: float = 500.0,
    warmup_ms: float = 50.0,
    rounds: int = 8,
    max_runs: int = 1000,
) -> dict[str, Timing]:
    """Several calls of the same inputs (an op and the kernel in its place; whole forwards of a
    model, variants of one, of no inputs) timed side by side, each with budget_ms, each on a clone
    of its own refreshed as measure does: in `rounds` rounds each runs its share, in an order
    reversed from round to round. A host shared with other work drifts: on the H200's host, eager
    ResNet-50 took 4.2 to 7.2 ms a forward within one minute of one process (docs/integrate.md,
    "Timed side by side"), so two calls timed a minute apart compare the moments, not the calls.
    Timed together, a drift falls on each alike. No GPU lead: each is timed as it serves, its host
    time counted."""
    device = devices.of(device)
    runners = {name: _Runner(fn, input_sets, clone_inputs(input_sets[0]), device) for name, fn in fns.items()}
    per_call = {name: _warmed(runner, warmup_ms, max_runs) for name, runner in runners.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    host: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for round_ in range(rounds):
        for name in order if round_ % 2 == 0 else order[::-1]:
            n = max(1, min(max_runs // rounds, int(budget_ms / rounds / per_call[name])))
            samples[name] += runners[name].run(n)
            host[name] += runners[name].host_ms
    return {
        name: _timing(runners[name], samples[name], host[name], 0.0, _host_calls(budget_ms, per_call[name]))
        for name in fns
    }


def _warmed(runner: _Runner, warmup_ms: float, max_runs: int) -> float:
    """Warms the call up for warmup_ms; then the ms one call takes, estimated. A call that takes
    the whole warm-up by itself (a full-depth LLM's request, seconds) is warmed by two calls and
    estimated by the second: three more were a fifth of a model run's timings."""
    runner.run(1)  # the first call pays lazy initialisation: never counted
    estimate = max(runner.run(1)[0], 1e-3)
    if 0 < warmup_ms <= estimate:
        return estimate
    runner.run(max(1, min(max_runs, int(warmup_ms / estimate))))
    return max(statistics.median(runner.run(3)), 1e-3)


def _host_calls(budget_ms: float, per_call_ms: float) -> int:
    """Calls issued to an idle queue for the host's time: _HOST_SAMPLES, as many as fit the budget."""
    return max(1, min(_HOST_SAMPLES, int(budget_ms / max(per_call_ms, 1e-3))))


def _timing(runner: _Runner, samples: list[float], host_ms: list[float], lead_ms: float, host_calls: int) -> Timing:
    host = statistics.median(host_ms)
    if runner.device.asynchronous:
        # Also from a few calls issued to an idle queue: in the long run a GPU-bound call fills the
        # launch queue, and its launches then block, so the host would seem as slow as the GPU. Either
        # window can only be slowed (a full queue; a stall of the process, seen on the H200 in a
        # process's first timing, benchmarks/lead_probe.py), never sped up: the lesser is the host's.
        runner.run(host_calls)
        host = min(host, statistics.median(runner.host_ms))
    return of_samples(samples, host, lead_ms)


def _quantile(samples: list[float], q: float) -> float:
    return samples[min(len(samples) - 1, int(q * len(samples)))]


def of_samples(samples: Sequence[float], host_ms: float | None = None, lead_ms: float = 0.0) -> Timing:
    """The Timing of these calls' times (ms): median, 20th and 80th percentiles, QUANTILES points."""
    ordered = sorted(samples)
    quantiles = tuple(_quantile(ordered, i / (QUANTILES - 1)) for i in range(QUANTILES))
    return Timing(
        statistics.median(ordered),
        _quantile(ordered, 0.2),
        _quantile(ordered, 0.8),
        len(ordered),
        host_ms,
        lead_ms,
        quantiles,
    )


@dataclass(frozen=True)
class Paired:
    """Two calls timed in alternating rounds on one clock (the referee's): each one's time net of the
    bracket's own cost, the speedup (first over second) with the spread of the rounds' ratios."""

    first: Timing
    second: Timing
    ratio: float  # first's 20th percentile over second's, both net of the bracket
    ratio_p20: float  # the rounds' ratios: 20th and 80th percentiles
    ratio_p80: float
    bracket_ms: float  # the bracket's own cost, taken from both


def paired(
    first_ms: Sequence[float],
    second_ms: Sequence[float],
    bracket_ms: Sequence[float],
    first_alone: Sequence[float] | None = None,
) -> Paired:
    """Round i's first_ms[i] and second_ms[i], each less the least bracket_ms (what a bracket costs
    with no call in it: the handshake and the copies; another process only ever adds to it), never
    below a twentieth of itself. On a shared machine another job's preemptions only add time, to
    either call at random: the 20th percentiles are each call's cost with the least interference,
    and their ratio held within 10% over four runs beside a burning core where the median of the
    rounds' ratios swung 1.6x (docs/evaluation.md).

    first_alone: the first's times from before the second existed, bracket included like the rounds'
    and netted as theirs are; where they are lower, they count (on a device, work the second left
    queued can slow the first beside it, and the ratio may only err low for the second)."""
    cost = min(bracket_ms) if bracket_ms else 0.0
    net = lambda ms: max(ms - cost, ms / 20)
    first, second = [net(ms) for ms in first_ms], [net(ms) for ms in second_ms]
    ratios = sorted(f / s for f, s in zip(first, second))
    a, b = of_samples(first), of_samples(second)
    scale = 1.0
    if first_alone:
        alone = of_samples([net(ms) for ms in first_alone])
        if alone.p20_ms < a.p20_ms:
            a, scale = alone, alone.p20_ms / a.p20_ms
    return Paired(a, b, a.p20_ms / b.p20_ms, scale * _quantile(ratios, 0.2), scale * _quantile(ratios, 0.8), cost)


# Points of the timed calls' distribution a Timing keeps (0%, 5%, ..., 100%): enough to draw it and
# to hand pytest-benchmark, without keeping every sample of a microsecond kernel.
QUANTILES = 21


_HOST_SAMPLES = 7
_MAX_LEAD_MS = 2.0  # a call whose host takes longer than this is not a kernel's launch overhead
