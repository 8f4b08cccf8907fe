"""The Device adapter: timer and synchronisation, cache flush, profiler, escaped-work probe,
roofline sizes and environment record, as the evaluator's worker uses them.

The defaults here are a host-synchronous device (a CPU): calls are done when they return, the
host's clock times them, and there is no cache the harness can flush. A device whose work runs
asynchronously (a GPU) overrides what differs; the worker and timing call only these methods.
"""

from __future__ import annotations

import os
import platform as _platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from harness.evaluate import outputs

# The host's clock, bound before any candidate can patch `time`.
perf_counter = time.perf_counter
_tensor_sum = torch.Tensor.sum
process_time = time.process_time
sleep = time.sleep

# The profiler's C API, bound before any candidate loads. Started this way it records the ATen ops of
# every thread (and, given CUDA activity, each kernel on every stream) without setting
# torch.autograd.profiler's Python flag, which a candidate could read to tell profiled calls apart.
from torch._C._autograd import _disable_profiler, _enable_profiler, _prepare_profiler  # noqa: E402
from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig  # noqa: E402

# A CPU candidate's threads that burn this much CPU in the 100 ms after forward returned are doing
# work forward did not wait for (or spinning in a pool whose wait policy the worker did not set).
_ESCAPED_CPU_MS = 20


# ATen's kernels by namespace: code linking these computes with PyTorch's kernels directly.
_ATEN_NAMESPACES = (
    "at::cpu::",
    "at::cuda::",
    "at::native::",
    "at::compositeexplicitautograd::",
    "at::compositeimplicitautograd::",
    "at::meta::",
)
_run, _NM = subprocess.run, shutil.which("nm") or "nm"


def own_libraries() -> list[str] | None:
    """The shared libraries this process mapped from the worker's cache and temporary folders (the
    candidate's builds), or None when the process's maps cannot be read."""
    names = ("FORGEBENCH_BUILD_CACHE", "TORCH_EXTENSIONS_DIR", "TMPDIR")
    roots = tuple(os.environ[k] for k in names if k in os.environ)
    try:
        with open("/proc/self/maps") as maps:
            paths = [line.split()[-1] for line in maps if line.rstrip().endswith(".so")]
    except OSError:
        return None
    return list(dict.fromkeys(p for p in paths if roots and p.startswith(roots)))


_PAGE = 4096


def _touch(output: Any) -> None:
    """Read one element of every page of the output's tensors (plain ones: a subclass's hooks are
    not run for it, Watched names it)."""
    found = outputs.leaves(output)
    for tensor in [] if isinstance(found, str) else found:
        if tensor.numel() and tensor.device.type == "cpu":
            _tensor_sum(tensor.reshape(-1)[:: max(1, _PAGE // tensor.element_size())])


class ProfilerFailure(RuntimeError):
    """The profiler itself failed or saw nothing, as opposed to the function it watched."""


def _profiler_step(step: Callable[[], Any]) -> Any:
    try:
        return step()
    except Exception as exc:
        raise ProfilerFailure(f"{type(exc).__name__}: {exc}") from exc


def profiled(fn: Callable[[], Any], activities: set, after: Callable[[], None] = lambda: None):
    """fn() under the profiler (its C API, every thread): fn's result and the events recorded, as
    (device type, start ns, end ns, name, is a user annotation). `after` runs inside, once fn is
    done (a GPU's synchronisation and sentinel fill). fn's exceptions pass through; the profiler's
    own failures raise ProfilerFailure."""
    config = _profiler_step(
        lambda: ProfilerConfig(
            ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig(profile_all_threads=True), ""
        )
    )
    _profiler_step(lambda: _prepare_profiler(config, activities))
    _profiler_step(lambda: _enable_profiler(config, activities))
    try:
        out = fn()
        after()
    except BaseException:
        try:  # fn's error is the one to report, not the profiler's on the way out
            _disable_profiler()
        except Exception:
            pass
        raise
    result = _profiler_step(_disable_profiler)
    events = _profiler_step(
        lambda: [(e.device_type(), e.start_ns(), e.end_ns(), e.name(), e.is_user_annotation()) for e in result.events()]
    )
    return out, events


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal element by element, NaN where the other has NaN included."""
    if not a.is_floating_point():
        return torch.equal(a, b)
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


@dataclass(frozen=True)
class Ceilings:
    """Sizes that fill the device for the roofline probe (roofline.measure_ceilings)."""

    copy_bytes: int
    matmul_n: int
    matmul_dtype: torch.dtype


class Device:
    name = "cpu"  # the adapter's name, as a platform's YAML gives it
    torch_type = "cpu"  # torch.device(...).type of the tensors it runs
    asynchronous = False  # whether a call returns before its work is done (timing counts device time)
    supports_ncu = False  # whether Nsight Compute can profile its kernels
    ceilings = Ceilings(copy_bytes=2**28, matmul_n=1024, matmul_dtype=torch.float32)
    # Names of callables a candidate might replace to fool the timer (timing.replaced_clocks; the
    # harness calls its own copies, bound at import). The profiler's C API is not among them: the
    # worker wraps it to note a candidate that calls it (observers.py).
    watched: tuple[str, ...] = ()
    # Whether another process can open this device's tensors in place (export/opened): then the
    # reference session hands the candidate its call slots in device memory (hands.DeviceHands).
    shares_memory = False
    # Whether a forward on this device can be captured once and replayed (CUDA graphs): e2e's
    # cuda_graph modes (integrate/modes.py) run only where it can.
    graph_capture = False

    def torch_device(self) -> torch.device:
        return torch.device(self.torch_type)

    def available(self) -> str | None:
        """None when this machine has the device, else a sentence saying why not."""
        return None

    def synchronize(self) -> None:
        """Wait until every call issued so far is done."""

    def flush_buffer(self) -> torch.Tensor | None:
        """A buffer a pass over which evicts the device's last-level cache, or None when the harness
        cannot flush it (a CPU's caches are the operating system's to share)."""
        return None

    def time_calls(self, prepare: Callable[[], None], call: Callable[[], object], n: int, lead_cycles: int = 0):
        """n calls, each after prepare(): (each call's time in ms, each call's host time in ms).
        Each call's time includes a read of one element per page of its output: an output whose
        pages are filled only when first read (a fault handler on a protected mapping) is computed
        inside the timer, not after it."""
        host = []
        for _ in range(n):
            prepare()
            start = perf_counter()
            _touch(call())
            host.append((perf_counter() - start) * 1e3)
        return list(host), host

    def cycles_per_ms(self) -> float | None:
        """The rate of the device-side spin that gives a GPU its lead; None where there is none."""
        return None

    # The torch profiler, for the analyst's profile: which activities, and which time is the work's.
    def profiler_activities(self) -> list:
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU]

    profile_kind = "host"  # "device": each kernel's own device time; "host": each op's self CPU time
    profiled_event_type = torch.autograd.DeviceType.CPU  # the profiler's events that carry that time

    def profiling_range(self, name: str):
        """A range an external profiler (ncu) selects the profiled call by; a no-op where none."""
        from contextlib import nullcontext

        return nullcontext()

    def busy_ms(self, fn: Callable[..., Any], inputs: Sequence[Any]) -> tuple[Any, float | None, list[str]]:
        """fn(*inputs) once, how long the device worked on it on every queue where a profiler can
        tell (a GPU's side streams; None on a device whose calls are done when they return), and
        what it ran by name: on a CPU the ATen ops of every thread (the op recorder sees only the
        calling thread's), on a GPU its kernels."""
        out, events = profiled(lambda: fn(*inputs), {ProfilerActivity.CPU})
        return out, None, list(dict.fromkeys(name for _, _, _, name, _ in events if name.startswith("aten::")))

    def library_kernels(self, kernels: Sequence[str]) -> list[str]:
        """Which of busy_ms's names are PyTorch's computation (on a CPU: ATen compute ops)."""
        from harness.evaluate.checks import is_allowed

        ops = [name.removeprefix("aten::") for name in kernels]
        return [f"aten.{op}" for op in ops if not is_allowed(op)]

    def own_code(self, kernels: Sequence[str]) -> bool:
        """Whether the candidate ran code of its own: on a CPU, a library it built is mapped (the
        platform's build cache or torch's extensions, both under the worker's cache folders)."""
        built = own_libraries()
        return True if built is None else bool(built)  # maps unreadable: no rejection on a guess

    def library_symbols(self) -> list[str]:
        """ATen's computation that the candidate's own libraries call by symbol (at::cpu::mul,
        at::native::...): those calls reach neither the dispatcher nor the profiler."""
        found: dict[str, None] = {}
        for library in own_libraries() or []:
            try:
                listing = _run(
                    [_NM, "-D", "-C", "--undefined-only", library], capture_output=True, text=True, timeout=30
                )
            except (OSError, ValueError, subprocess.SubprocessError):
                continue
            for line in listing.stdout.splitlines():
                symbol = line.split(None, 1)[-1].strip()
                if symbol.startswith(_ATEN_NAMESPACES):
                    found.setdefault(symbol.split("(", 1)[0])
        return list(found)

    def warm_profiler(self) -> None:
        """Start and stop the profiler once, before the candidate loads: its threads then exist from
        the first call on, so their appearance cannot mark the profiled calls (a candidate counting
        /proc/self/task would see them start on the first unseen call)."""
        try:
            self.busy_ms(lambda: None, [])
        except Exception:  # a profiler that fails here fails in the unseen calls, which say so
            pass

    def profiler_failure(self) -> str | None:
        """Why busy_ms cannot measure work in this process, or None when it can (or need not)."""
        return None

    def escaped_work(self, fn: Callable[..., Any], inputs: Sequence[Any], call_ms: float) -> str | None:
        """Work still running when forward returns (threads on a CPU), as a sentence, or None:
        output that still changes after forward returned, or CPU burnt in the 100 ms after it. A
        thread pool that spin-waits after its work (OpenBLAS for 100 ms by default) is told not to
        by every worker's start-up environment (sandbox.QUIET_POOLS), so what burns is the
        candidate's own."""
        returned = outputs.leaves(fn(*inputs))
        kept = [t.detach().clone() for t in returned] if not isinstance(returned, str) else []
        before = process_time()
        sleep(0.1)
        busy_ms = (process_time() - before) * 1e3
        if any(not _same(k, t) for k, t in zip(kept, returned)):
            return "forward's output changed after it returned; work must finish inside forward"
        if busy_ms > _ESCAPED_CPU_MS:
            return (
                f"the process used {busy_ms:.0f} ms of CPU in the 100 ms after forward returned; "
                "work must finish inside forward"
            )
        return None

    def environment(self) -> dict[str, Any]:
        """What a result records of the machine it was measured on."""
        return {
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "device": self.torch_type,
            "device_name": _platform.processor() or _platform.machine(),
            "threads": torch.get_num_threads(),
            "asynchronous": self.asynchronous,
        }

    def device_name(self) -> str:
        return _platform.processor() or _platform.machine() or self.name

    def driver(self) -> str:
        """The device driver's version, as a run's `env.driver` tag records it."""
        return "none"

    def memory_bytes(self) -> int:
        """The device's memory in bytes (a CPU's is the machine's)."""
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def export(self, t: torch.Tensor) -> dict:
        """A contiguous tensor as a description another process opens with opened(); where
        shares_memory is False there is none."""
        raise NotImplementedError(f"{self.name} tensors cannot be opened by another process")

    def opened(self, entries: list[dict], dtypes: dict[str, torch.dtype]):
        """A context manager: the tensors that export() described, in place, while it lasts."""
        raise NotImplementedError(f"{self.name} tensors cannot be opened by another process")

    def empty_cache(self) -> None:
        """Give back memory the allocator keeps cached (between tasks of very different sizes)."""
