"""The one timing module: warm-up, fresh input contents before every call, cache flush, events,
and the median of enough calls to fill a time budget.

Imported by the worker before any candidate code loads, so the clocks below are bound to the
real functions even if a candidate later patches `time` or `torch.cuda.Event`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

_perf_counter = time.perf_counter
_cuda_synchronize = torch.cuda.synchronize
# The event's own functions, not looked up on the class at each call: a candidate that patches
# torch.cuda.Event.elapsed_time changes the class, not these.
_CudaEvent = torch.cuda.Event
_event_new = torch.cuda.Event.__new__
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_current_stream = torch.cuda.current_stream
_cuda_sleep = torch.cuda._sleep  # a device-side spin of so many cycles: the GPU's lead (measure's gpu_lead)
# The L2 flush's own methods: a candidate that patches Tensor.sum must not skip the flush.
_tensor_view, _tensor_sum, _tensor_zero = torch.Tensor.view, torch.Tensor.sum, torch.Tensor.zero_
# The profiler's, for profiled_call: a candidate that patches them would blind the hidden-work check.
_Profile = torch.profiler.profile
_profile_enter, _profile_exit, _profile_events = _Profile.__enter__, _Profile.__exit__, _Profile.events

# Clocks a candidate might replace to fool a timer that reads them after it loads.
_WATCHED = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.monotonic",
    "time.monotonic_ns",
    "time.time",
    "time.process_time",
    "torch.cuda.Event",
    "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize",
    "torch.cuda.synchronize",
    "torch.cuda.current_stream",
    "torch.Tensor.view",
    "torch.Tensor.sum",
    "torch.Tensor.zero_",
    "torch.profiler.profile",
    "torch.profiler.profile.__enter__",
    "torch.profiler.profile.__exit__",
    "torch.profiler.profile.events",
    "torch.profiler.profile.start",
    "torch.profiler.profile.stop",
    "torch.autograd.profiler.profile._parse_kineto_results",
    "torch.autograd.profiler.profile.__exit__",
)


def _resolve(path: str) -> object:
    head, *rest = path.split(".")
    value: object = {"time": time, "torch": torch}[head]
    for name in rest:
        value = getattr(value, name, None)
    return value


_BOUND = {path: _resolve(path) for path in _WATCHED}


def replaced_clocks() -> list[str]:
    """The clocks and timer functions that no longer are what they were when this module loaded."""
    return [path for path, value in _BOUND.items() if _resolve(path) is not value]


# Larger than any current GPU's L2 (H200: 60 MB), so a pass over it evicts the previous call's data.
_L2_FLUSH_BYTES = 256 * 1024 * 1024


L2_FLUSH = "read"  # how measure empties the L2 before each call (flush_l2); manifests record it


def flush_l2(buffer: torch.Tensor, mode: str = L2_FLUSH) -> None:
    """Evict the L2 by a pass over `buffer` (uint8, a multiple of 8 bytes). "read" leaves it
    holding clean lines; "write" (a memset, as triton.testing.do_bench does) leaves it full of
    dirty lines, whose write-back then shares DRAM bandwidth with the next timed kernel and slows a
    small memory-bound one (10-13% on 4-50 MB copies on the H200, docs/benchmarks.md)."""
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

    def to_dict(self) -> dict[str, float]:
        return {
            "median_ms": self.median_ms,
            "p20_ms": self.p20_ms,
            "p80_ms": self.p80_ms,
            "runs": self.runs,
            "host_ms": self.host_ms,
            "lead_ms": self.lead_ms,
            "quantiles_ms": list(self.quantiles_ms),
        }


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
    by the call count, so a result cached by address or by a sample of the contents never hits."""

    def __init__(
        self,
        fn: Callable[..., object],
        input_sets: Sequence[Sequence[Any]],
        working: list[Any],
        device: torch.device,
        flush: str = L2_FLUSH,
    ):
        self.fn, self.input_sets, self.working, self.device, self.flush_mode = fn, input_sets, working, device, flush
        self.calls = 0
        self.host_ms: list[float] = []  # each call's host time, from the last run
        self.lead_cycles = 0  # GPU cycles spun before each start event
        self.flush = torch.zeros(_L2_FLUSH_BYTES, dtype=torch.uint8, device=device) if device.type == "cuda" else None

    def _prepare(self) -> None:
        load_into(self.working, self.input_sets[self.calls % len(self.input_sets)], roll=self.calls)
        self.calls += 1
        if self.flush is not None:
            flush_l2(self.flush, self.flush_mode)

    def run(self, n: int) -> list[float]:
        self.host_ms = []
        if self.device.type != "cuda":
            for _ in range(n):
                self._prepare()
                start = _perf_counter()
                self.fn(*self.working)
                self.host_ms.append((_perf_counter() - start) * 1e3)
            return list(self.host_ms)
        pairs = []
        for _ in range(n):
            self._prepare()
            if self.lead_cycles:
                _cuda_sleep(self.lead_cycles)
            start, end = _event_new(_CudaEvent, enable_timing=True), _event_new(_CudaEvent, enable_timing=True)
            _event_record(start, _current_stream())
            issued = _perf_counter()
            self.fn(*self.working)
            self.host_ms.append((_perf_counter() - issued) * 1e3)
            _event_record(end, _current_stream())
            pairs.append((start, end))
        _cuda_synchronize()  # the whole device, so side-stream work a call left running is waited for
        return [_event_elapsed(s, e) for s, e in pairs]


def measure(
    fn: Callable[..., object],
    input_sets: Sequence[Sequence[Any]],
    device: torch.device,
    budget_ms: float = 500.0,
    warmup_ms: float = 50.0,
    min_runs: int = 5,
    max_runs: int = 1000,
    working: list[Any] | None = None,
    gpu_lead: bool = False,
    flush: str = L2_FLUSH,
) -> Timing:
    """Median time of fn over enough calls to fill budget_ms; inputs live in `working` (a clone of
    the first set unless given) and take the next set's contents before each call.

    With `gpu_lead`, on a GPU, the stream spins before each start event for a little longer than a
    call takes the host to issue, so the call's launches are queued before the GPU reaches the event
    and the events time the call's GPU work, as in a model whose host runs ahead; without it, a call
    whose host time exceeds its kernels' time is timed at its host time. Host time beyond
    _MAX_LEAD_MS still counts. `flush` is how the L2 is emptied before each call (see flush_l2)."""
    if not input_sets:
        raise ValueError("measure needs at least one input set")
    runner = _Runner(fn, input_sets, working if working is not None else clone_inputs(input_sets[0]), device, flush)
    estimate = max(runner.run(1)[0], 1e-3)  # the first call pays lazy initialisation: never counted
    runner.run(max(1, min(max_runs, int(warmup_ms / estimate))))
    estimate = max(statistics.median(runner.run(3)), 1e-3)
    lead_ms = 0.0
    if gpu_lead and device.type == "cuda":
        lead_ms = min(_MAX_LEAD_MS, 1.25 * statistics.median(runner.host_ms) + 0.01)
        runner.lead_cycles = int(lead_ms * _cycles_per_ms(device))
    runs = max(min_runs, min(max_runs, int(budget_ms / estimate)))
    samples = sorted(runner.run(runs))
    quantile = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    if device.type == "cuda":
        # Host time from a few calls issued to an idle queue: in the long run a GPU-bound call fills
        # the launch queue, and its launches then block, so the host would seem as slow as the GPU.
        runner.run(_HOST_SAMPLES)
    host_ms = statistics.median(runner.host_ms)
    quantiles = tuple(quantile(i / (QUANTILES - 1)) for i in range(QUANTILES))
    return Timing(statistics.median(samples), quantile(0.2), quantile(0.8), runs, host_ms, lead_ms, quantiles)


# Points of the timed calls' distribution a Timing keeps (0%, 5%, ..., 100%): enough to draw it and
# to hand pytest-benchmark, without keeping every sample of a microsecond kernel.
QUANTILES = 21


_HOST_SAMPLES = 7
_MAX_LEAD_MS = 2.0  # a call whose host takes longer than this is not a kernel's launch overhead
_CYCLES_PER_MS: dict[int, float] = {}


def _cycles_per_ms(device: torch.device) -> float:
    """The spin's rate on this device, measured once a process (the SM clock, as the GPU runs it)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _CYCLES_PER_MS:
        cycles, rates = 2_000_000, []
        with torch.cuda.device(index):  # the spin and the events act on the current device
            for _ in range(3):  # the clock ramps up under load: the fastest of three readings
                start, end = _event_new(_CudaEvent, enable_timing=True), _event_new(_CudaEvent, enable_timing=True)
                _event_record(start, _current_stream())
                _cuda_sleep(cycles)
                _event_record(end, _current_stream())
                _cuda_synchronize()
                rates.append(cycles / max(_event_elapsed(start, end), 1e-3))
        _CYCLES_PER_MS[index] = max(rates)
    return _CYCLES_PER_MS[index]


def device_wall_ms(
    fn: Callable[..., object], inputs: Sequence[Any], device: torch.device, calls: int = 20
) -> tuple[float, float]:
    """Host time per call to launch `calls` calls, and wall time per call until the whole device is
    idle: work that escapes the timed stream shows as the second far above the event time."""
    sync = _cuda_synchronize if device.type == "cuda" else (lambda: None)
    sync()
    start = _perf_counter()
    for _ in range(calls):
        fn(*inputs)
    launched = _perf_counter()
    sync()
    done = _perf_counter()
    return (launched - start) * 1e3 / calls, (done - start) * 1e3 / calls


class ProfilerFailure(RuntimeError):
    """The profiler itself failed or saw nothing, as opposed to the function it watched."""


def _profiler_step(step: Callable[[], Any]) -> Any:
    try:
        return step()
    except Exception as exc:
        raise ProfilerFailure(f"{type(exc).__name__}: {exc}") from exc


def profiled_call(fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[Any, float]:
    """fn(*inputs) once, started on an idle GPU and waited for, under the torch profiler: its
    output, and how long the GPU worked on it on every stream, the union of the intervals of the
    kernels, copies and fills CUPTI saw. Events on the timed stream cannot see a side stream that
    starts ahead of the start event (during the L2 flush or the GPU lead); this can.

    A fill of our own follows the call, after it is done: the last span. A profiler that records
    nothing (a patched one) misses it too, which raises ProfilerFailure, as do the profiler's own
    errors; fn's exceptions pass through."""
    sentinel = torch.empty(256, device="cuda")
    _cuda_synchronize()
    session = _profiler_step(lambda: _Profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]))
    _profiler_step(lambda: _profile_enter(session))
    try:
        out = fn(*inputs)
        _cuda_synchronize()
        _tensor_zero(sentinel)
        _cuda_synchronize()
    except BaseException:
        try:  # fn's error is the one to report, not the profiler's on the way out
            _profile_exit(session, None, None, None)
        except Exception:
            pass
        raise
    _profiler_step(lambda: _profile_exit(session, None, None, None))
    events = _profiler_step(lambda: list(_profile_events(session)))
    # User annotations (record_function ranges) also show as device spans, stretched over host gaps.
    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
    )
    if not spans:
        raise ProfilerFailure("it recorded no device work, not even the fill that follows the call")
    return out, union_length(spans[:-1]) / 1e3  # 0 for a call that only takes views


def profiler_failure(device: torch.device) -> str | None:
    """Why the profiler cannot measure GPU work in this process, or None (the reference's worker
    asks, where no candidate runs)."""
    try:
        profiled_call(_tensor_zero, [torch.empty(1024, device=device)])
    except ProfilerFailure as exc:
        return str(exc)
    return None


def union_length(spans: Sequence[tuple[float, float]]) -> float:
    """Total length covered by the intervals: work on several streams at once counts once."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total
