"""An NVIDIA GPU through torch.cuda: CUDA events on the current stream, an L2 flush sized by the
device, a device-side spin that gives the GPU its lead, CUPTI (the torch profiler) for work on
every stream, NVTX ranges for Nsight Compute.

Imported by the worker before any candidate code loads, so the functions below are bound to the
real ones even if a candidate later patches `torch.cuda.Event` or `torch.cuda.synchronize`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from harness.devices import cuda_ipc
from harness.devices.base import Ceilings, Device, ProfilerFailure, perf_counter, profiled

_synchronize = torch.cuda.synchronize
# The event's own functions, not looked up on the class at each call: a candidate that patches
# torch.cuda.Event.elapsed_time changes the class, not these.
_Event = torch.cuda.Event
_event_new = torch.cuda.Event.__new__
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_current_stream = torch.cuda.current_stream
_sleep = torch.cuda._sleep  # a device-side spin of so many cycles: the GPU's lead (timing.measure's gpu_lead)
_tensor_zero = torch.Tensor.zero_

# Several times the L2 (H200: 60 MB), so one pass evicts the previous call's data; never below this.
_FLUSH_L2_MULTIPLE, _MIN_FLUSH_BYTES = 4, 64 * 1024 * 1024
# How far a call's wall time until the device is idle may exceed its timed time (escaped_work), and
# how many measurements of it must all exceed that.
_ESCAPED_RATIO, _ESCAPED_SLACK_MS, _ESCAPED_CALLS, _ESCAPED_TRIES = 1.5, 0.02, 20, 3


# Kernel names, as CUPTI reports them, of PyTorch's and the vendor libraries' computation.
_LIBRARY_MARKS = (
    "at::",
    "cutlass",
    "cublas",
    "cudnn",
    "xmma",
    "nvjet",
    "gemv",
    "gemmk",
    "gemmSN",
    "splitKreduce",
    "implicit_convolve",
    "cask",
    "ampere_",
    "sm80_",
    "sm90_",
    "sm100_",
    "triton_poi_fused",
    "triton_red_fused",
    "triton_per_fused",
    "triton_tem_fused",
)
_DATA_MOVEMENT_MARKS = ("FillFunctor", "fill_kernel", "copy_kernel", "CopyKernel", "direct_copy", "Memset", "Memcpy")


def _is_library(kernel: str) -> bool:
    return any(mark in kernel for mark in _LIBRARY_MARKS)


def _is_data_movement(kernel: str) -> bool:
    return any(mark in kernel for mark in _DATA_MOVEMENT_MARKS)


def union_length(spans: Sequence[tuple[float, float]]) -> float:
    """Total length covered by the intervals: work on several streams at once counts once."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


class CudaDevice(Device):
    name = "cuda"
    torch_type = "cuda"
    asynchronous = True
    supports_ncu = True
    ceilings = Ceilings(copy_bytes=2**30, matmul_n=8192, matmul_dtype=torch.bfloat16)
    watched = Device.watched + (
        "torch.cuda.Event",
        "torch.cuda.Event.record",
        "torch.cuda.Event.elapsed_time",
        "torch.cuda.Event.synchronize",
        "torch.cuda.synchronize",
        "torch.cuda.current_stream",
        "torch.profiler.profile",
        "torch.profiler.profile.__enter__",
        "torch.profiler.profile.__exit__",
        "torch.profiler.profile.events",
        "torch.profiler.profile.start",
        "torch.profiler.profile.stop",
        "torch.autograd.profiler.profile._parse_kineto_results",
        "torch.autograd.profiler.profile.__exit__",
    )
    profile_kind = "device"
    shares_memory = True
    graph_capture = True
    profiled_event_type = DeviceType.CUDA

    def __init__(self) -> None:
        self._cycles_per_ms: dict[int, float] = {}

    def available(self) -> str | None:
        if not torch.cuda.is_available():
            return "this machine has no CUDA GPU that torch can use (torch.cuda.is_available() is False)"
        return None

    def synchronize(self) -> None:
        _synchronize()  # the whole device, so side-stream work a call left running is waited for

    def flush_buffer(self) -> torch.Tensor:
        l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
        nbytes = max(_MIN_FLUSH_BYTES, _FLUSH_L2_MULTIPLE * l2)
        return torch.zeros(nbytes - nbytes % 8, dtype=torch.uint8, device="cuda")

    def time_calls(self, prepare, call, n: int, lead_cycles: int = 0):
        pairs, host = [], []
        for _ in range(n):
            prepare()
            if lead_cycles:
                _sleep(lead_cycles)
            start, end = _event_new(_Event, enable_timing=True), _event_new(_Event, enable_timing=True)
            _event_record(start, _current_stream())
            issued = perf_counter()
            call()
            host.append((perf_counter() - issued) * 1e3)
            _event_record(end, _current_stream())
            pairs.append((start, end))
        _synchronize()
        return [_event_elapsed(s, e) for s, e in pairs], host

    def cycles_per_ms(self) -> float:
        """The spin's rate on this device, measured once a process (the SM clock, as the GPU runs it)."""
        index = torch.cuda.current_device()
        if index not in self._cycles_per_ms:
            cycles, rates = 2_000_000, []
            for _ in range(3):  # the clock ramps up under load: the fastest of three readings
                start, end = _event_new(_Event, enable_timing=True), _event_new(_Event, enable_timing=True)
                _event_record(start, _current_stream())
                _sleep(cycles)
                _event_record(end, _current_stream())
                _synchronize()
                rates.append(cycles / max(_event_elapsed(start, end), 1e-3))
            self._cycles_per_ms[index] = max(rates)
        return self._cycles_per_ms[index]

    def profiler_activities(self) -> list:
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]

    def profiling_range(self, name: str):
        from contextlib import contextmanager

        @contextmanager
        def nvtx_range():
            _synchronize()
            torch.cuda.nvtx.range_push(name)
            try:
                yield
                _synchronize()
            finally:
                torch.cuda.nvtx.range_pop()

        return nvtx_range()

    def busy_ms(self, fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[Any, float, list[str]]:
        """fn(*inputs) once, started on an idle GPU and waited for, under the torch profiler: its
        output, and how long the GPU worked on it on every stream, the union of the intervals of the
        kernels, copies and fills CUPTI saw. Events on the timed stream cannot see a side stream that
        starts ahead of the start event (during the L2 flush or the GPU lead); this can.

        A fill of our own follows the call, after it is done: the last span. A profiler that records
        nothing (a patched one) misses it too, which raises ProfilerFailure, as do the profiler's own
        errors; fn's exceptions pass through. Also the names of the kernels it ran, which
        library_kernels and own_code read."""
        sentinel = torch.empty(256, device="cuda")

        def after() -> None:
            _synchronize()
            _tensor_zero(sentinel)
            _synchronize()

        _synchronize()
        out, events = profiled(lambda: fn(*inputs), {ProfilerActivity.CPU, ProfilerActivity.CUDA}, after)
        # User annotations (record_function ranges) also show as device spans, stretched over host gaps.
        work = sorted(
            (start, end, name) for kind, start, end, name, note in events if kind == DeviceType.CUDA and not note
        )
        if not work:
            raise ProfilerFailure("it recorded no device work, not even the fill that follows the call")
        spans = [(start, end) for start, end, _ in work[:-1]]
        return out, union_length(spans) / 1e6, list(dict.fromkeys(name for *_, name in work[:-1]))

    def profiler_failure(self) -> str | None:
        try:
            self.busy_ms(_tensor_zero, [torch.empty(1024, device="cuda")])
        except ProfilerFailure as exc:
            return str(exc)
        return None

    def library_kernels(self, kernels: Sequence[str]) -> list[str]:
        """The kernels that are PyTorch's or a vendor library's computation (ATen, cuBLAS, cuDNN,
        CUTLASS, Inductor), not fills and copies: a candidate that reaches them without the
        dispatcher (ctypes into cuBLAS, another thread) still shows here."""
        return [k for k in kernels if _is_library(k) and not _is_data_movement(k)]

    def own_code(self, kernels: Sequence[str]) -> bool:
        return any(not _is_library(k) and not _is_data_movement(k) for k in kernels)

    def wall_ms(self, fn: Callable[..., Any], inputs: Sequence[Any], calls: int = _ESCAPED_CALLS):
        """Host time per call to launch `calls` calls, and wall time per call until the whole device
        is idle: work that escapes the timed stream shows as the second far above the event time."""
        _synchronize()
        start = perf_counter()
        for _ in range(calls):
            fn(*inputs)
        launched = perf_counter()
        _synchronize()
        done = perf_counter()
        return (launched - start) * 1e3 / calls, (done - start) * 1e3 / calls

    def escaped_work(self, fn: Callable[..., Any], inputs: Sequence[Any], call_ms: float) -> str | None:
        """Why the calls leave work running past their return, or None. A host descheduled while it
        waits for the device (compilers on every core beside the timing) reads as device time too:
        on the H200 one honest load_inline kernel of a regrade read 0.264 ms against 0.121 ms with 16
        builds beside it. Work that escapes does so every time, so a call is judged by the least of
        a few measurements."""
        least = None
        for _ in range(_ESCAPED_TRIES):
            host_ms, wall_ms = self.wall_ms(fn, inputs)
            if wall_ms <= _ESCAPED_RATIO * max(call_ms, host_ms) + _ESCAPED_SLACK_MS:
                return None
            least = wall_ms if least is None else min(least, wall_ms)
        return (
            f"each call keeps the GPU busy {least:.3g} ms but its own stream only {call_ms:.3g} ms; "
            "work left running on other streams when forward returns is not allowed"
        )

    def environment(self) -> dict[str, Any]:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env = {
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "device": self.torch_type,
            "device_name": props.name,
            "cuda": torch.version.cuda,
            "sm_count": props.multi_processor_count,
            "asynchronous": True,
        }
        try:
            import triton

            env["triton"] = triton.__version__
        except ImportError:
            pass
        return env

    def device_name(self) -> str:
        return torch.cuda.get_device_name() if torch.cuda.is_available() else "cuda (none here)"

    def driver(self) -> str:
        import subprocess

        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return "none"
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "none"

    def memory_bytes(self) -> int:
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory

    def export(self, t: torch.Tensor) -> dict:
        return cuda_ipc.export(t)

    def opened(self, entries: list[dict], dtypes: dict[str, torch.dtype]):
        return cuda_ipc.opened(entries, dtypes)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()


DEVICE = CudaDevice()
