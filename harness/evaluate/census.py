"""The referee's census of where a candidate's CPU time goes, taken from outside its process.

The kernel's perf events sample the instruction pointer of every thread of the candidate's worker
(those it has when it is ready, and every thread they start) while its calls run; the referee opens
the events, reads their ring buffers and maps each address to the file mapped there. The worker can
neither see nor edit any of it, unlike the op recorder and the profiler in its own process: a
forward that has PyTorch do the work shows as time in libtorch_cpu, whatever it clears or forges.
Needs perf events for the worker's user (as root: CAP_PERFMON; else kernel.perf_event_paranoid <= 1);
where they are refused the census is skipped and says why.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
import struct
from collections import Counter
from pathlib import Path

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong)
_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
_PERF_TYPE_SOFTWARE, _PERF_COUNT_SW_TASK_CLOCK = 1, 1
_SAMPLE_IP, _SAMPLE_TID = 1, 2
_DISABLED, _INHERIT, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 1, 1 << 5, 1 << 6
_ENABLE, _DISABLE, _SET_OUTPUT = 0x2400, 0x2401, 0x2405
_MAX_EVENTS = 512  # threads x CPUs: an event each (inherited events need a CPU to be mapped)
_RECORD_SAMPLE = 9
_PERIOD_NS = 100_000  # a sample every 100 us of a thread's CPU time
_PAGES = 64  # ring buffer pages per thread: about 10,000 samples between drains
_HEADER = struct.Struct("<IHH")
_SAMPLE = struct.Struct("<QII")

# What a sampled address is, by the file mapped there. ATen's CPU kernels (and the BLAS and oneDNN
# linked into it) are in libtorch_cpu; the dispatcher's and the bindings' overheads in the others.
PYTORCH_COMPUTE = ("libtorch_cpu.so",)
# A GPU's ATen kernels are launched from here (the host side of PyTorch's CUDA ops): diagnosis only,
# since a GPU's computation is not the host's time.
PYTORCH_DEVICE = ("libtorch_cuda.so", "libc10_cuda.so")
_RUNTIME = ("libc10.so", "libtorch_python.so", "libtorch.so", "libshm.so")


class _Attr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
    ]


class CensusUnavailable(OSError):
    """Perf events cannot sample the worker here (the reason is the sentence)."""


def worker_pid(started_pid: int) -> int:
    """The worker's pid as this process sees it: the zygote's child, or, where that child made a PID
    namespace and waits for its first process (confine.hide_other_processes), that process."""
    try:
        children = Path(f"/proc/{started_pid}/task/{started_pid}/children").read_text().split()
    except OSError:
        children = []
    return int(children[0]) if len(children) == 1 else started_pid


class Census:
    """Samples of one worker's threads (and of every thread they start), attributed by mapped file,
    between start() and stop()."""

    def __init__(self, pid: int, own_roots: list[Path]):
        if _NR_PERF_EVENT_OPEN is None:
            raise CensusUnavailable(f"no perf_event_open number known for {os.uname().machine}")
        self.pid, self.own_roots = pid, [str(r) for r in own_roots]
        self.counts: Counter[str] = Counter()
        self._fds: list[int] = []
        self._rings: dict[int, mmap.mmap] = {}  # by CPU: every event of that CPU writes into one ring
        self._ring_fds: dict[int, int] = {}
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
            cpus = sorted(os.sched_getaffinity(0))
            if len(tids) * len(cpus) > _MAX_EVENTS:
                raise CensusUnavailable(f"{len(tids)} threads on {len(cpus)} CPUs need too many perf events")
            _enough_descriptors(2 * len(tids) * len(cpus))
            for tid in tids:
                for cpu in cpus:
                    self._open(tid, cpu)
            self._read_maps()
        except OSError:
            self.close()
            raise

    def _open(self, tid: int, cpu: int) -> None:
        attr = _Attr(type=_PERF_TYPE_SOFTWARE, size=ctypes.sizeof(_Attr), config=_PERF_COUNT_SW_TASK_CLOCK)
        attr.sample_period, attr.sample_type = _PERIOD_NS, _SAMPLE_IP | _SAMPLE_TID
        attr.flags = _DISABLED | _INHERIT | _EXCLUDE_KERNEL | _EXCLUDE_HV
        fd = _libc.syscall(_NR_PERF_EVENT_OPEN, ctypes.byref(attr), tid, cpu, -1, 0)
        if fd < 0:
            errno = ctypes.get_errno()
            raise CensusUnavailable(errno, f"perf_event_open refused ({os.strerror(errno)})")
        self._fds.append(fd)
        if cpu in self._rings:
            if _libc.ioctl(fd, _SET_OUTPUT, self._ring_fds[cpu]) != 0:
                raise CensusUnavailable(ctypes.get_errno(), "perf events could not share a ring buffer")
        else:
            self._rings[cpu] = mmap.mmap(fd, (1 + _PAGES) * mmap.PAGESIZE)
            self._ring_fds[cpu] = fd

    def _read_maps(self) -> None:
        maps = []
        for line in Path(f"/proc/{self.pid}/maps").read_text().splitlines():
            fields = line.split(None, 5)
            if len(fields) == 6 and "x" in fields[1]:
                start, end = (int(v, 16) for v in fields[0].split("-"))
                maps.append((start, end, fields[5]))
        self._maps = sorted(maps)

    def start(self) -> None:
        for fd in self._fds:
            _libc.ioctl(fd, _ENABLE, 0)

    def stop(self) -> None:
        for fd in self._fds:
            _libc.ioctl(fd, _DISABLE, 0)
        self.drain()

    def drain(self) -> None:
        """Count the samples taken so far (often enough that no ring fills: about 10,000 samples)."""
        for ring in self._rings.values():
            self._drain(ring)

    def _drain(self, ring: mmap.mmap) -> None:
        head, tail = struct.unpack_from("<QQ", ring, 1024)
        size, base = _PAGES * mmap.PAGESIZE, mmap.PAGESIZE
        while tail < head:
            at = tail % size
            kind, _, length = _HEADER.unpack(_wrapped(ring, base, size, at, _HEADER.size))
            if length < _HEADER.size:
                break
            if kind == _RECORD_SAMPLE:
                ip, _, _ = _SAMPLE.unpack(_wrapped(ring, base, size, (at + _HEADER.size) % size, _SAMPLE.size))
                self.counts[self._where(ip)] += 1
            tail += length
        struct.pack_into("<Q", ring, 1032, head)

    def _where(self, ip: int) -> str:
        i = bisect.bisect_right(self._maps, (ip, float("inf"), "")) - 1
        if i < 0 or not self._maps[i][0] <= ip < self._maps[i][1]:
            return "anonymous"  # code made at run time (a JIT), or not mapped from a file
        path = self._maps[i][2]
        name = os.path.basename(path)
        if any(path.startswith(root) for root in self.own_roots):
            return "own"
        if name.startswith(PYTORCH_COMPUTE):
            return "pytorch"
        if name.startswith(PYTORCH_DEVICE):
            return "pytorch_device"
        if name.startswith(_RUNTIME):
            return "pytorch_runtime"
        if name.startswith(("python", "libpython")):
            return "python"
        if name.startswith(("libc.so", "libc-", "libm.so", "libm-", "ld-linux")):
            return "libc"
        return "other"

    def shares(self) -> dict[str, float]:
        total = sum(self.counts.values())
        return {k: round(v / total, 4) for k, v in self.counts.most_common()} if total else {}

    def close(self) -> None:
        for ring in self._rings.values():
            ring.close()
        for fd in self._fds:
            os.close(fd)
        self._fds, self._rings = [], {}


def _enough_descriptors(more: int) -> None:
    """Raise this process's open-file limit toward its hard limit where `more` descriptors may not
    fit: the referee holds an event (and a ring) per thread and CPU for each worker it observes, two
    workers an evaluation, and several evaluations at once in a regrade."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd"))
    if soft != resource.RLIM_INFINITY and open_now + more > soft // 2 and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _wrapped(ring: mmap.mmap, base: int, size: int, at: int, n: int) -> bytes:
    first = ring[base + at : base + min(size, at + n)]
    return first + ring[base : base + n - len(first)]
