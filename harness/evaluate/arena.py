"""Where the referee and a worker meet: files of shared memory that hold a call's inputs and outputs,
and a pair of FIFOs that carry the protocol's messages (protocol.py).

The referee owns every file (it creates them, and a candidate's are handed to the worker's user
only); it writes each call's inputs itself, and reads the outputs and checks the inputs itself
once the worker answers, so nothing the worker's process says about them is believed.
"""

from __future__ import annotations

import mmap
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.evaluate.protocol import MAX_LINE, Answer, Command, Layout, ProtocolError, Slot, decode, encode
from harness.evaluate.report import WorkerReport

_ALIGN = 64
NOBODY = 65534


def _span(t) -> int:
    """Elements in the storage span a tensor's layout covers (as timing._raw)."""
    return 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride())) if t.numel() else 0


def _slots(tensors: Sequence[Any]) -> tuple[list[Slot | None], int]:
    slots, offset = [], 0
    for t in tensors:
        if not hasattr(t, "element_size"):
            slots.append(None)
            continue
        extent = _span(t)
        slots.append(Slot(str(t.dtype).removeprefix("torch."), list(t.shape), list(t.stride()), extent, offset))
        offset += extent * t.element_size()
        offset += -offset % _ALIGN
    return slots, offset


def layout_of(inputs: Sequence[Any], outputs: Sequence[Any]) -> Layout:
    """The regions' layout for a call of these inputs (their strides kept) and these outputs
    (contiguous: the worker copies whatever forward returned into them)."""
    in_slots, in_bytes = _slots(inputs)
    out_slots, out_bytes = _slots([t.contiguous() for t in outputs])
    return Layout(in_slots, [s for s in out_slots if s is not None], in_bytes, out_bytes)


class Region:
    """A file of shared memory, mapped."""

    def __init__(self, path: Path, size: int = 0, create: bool = False, owner: int | None = None):
        """The file at path, created with `size` bytes (at least one), or opened at its own size."""
        self.path = Path(path)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(self.path, flags, 0o600)
        try:
            self.size = max(size, 1) if create else os.fstat(fd).st_size
            if create:
                os.ftruncate(fd, self.size)
                if owner is not None and os.getuid() == 0:
                    os.fchown(fd, owner, owner)
            self.map = mmap.mmap(fd, self.size)
        finally:
            os.close(fd)

    def array(self):
        """The region as numpy bytes (the referee's view: copies and comparisons at memcpy speed)."""
        import numpy

        return numpy.frombuffer(self.map, dtype=numpy.uint8)

    def tensors(self, slots: Sequence[Slot | None], values: Sequence[Any] = (), base: int = 0) -> list[Any]:
        """The slots, `base` bytes into the region, as tensors living in it (a worker's view)."""
        import torch

        return views(torch.frombuffer(self.map, dtype=torch.uint8), slots, values, base)


def views(raw, slots: Sequence[Slot | None], values: Sequence[Any] = (), base: int = 0) -> list[Any]:
    """The slots as tensors over `raw` (a flat uint8 tensor, in host or device memory), `base` bytes
    in; values fill the None slots."""
    import torch

    from harness.evaluate.outputs import DTYPES

    found, rest = [], iter(values)
    for slot in slots:
        if slot is None:
            found.append(next(rest, None))
            continue
        dtype = DTYPES[slot.dtype]
        if slot.extent == 0:
            found.append(torch.empty(slot.shape, dtype=dtype, device=raw.device))
            continue
        found.append(
            _alone(raw, base + slot.offset, slot.extent * dtype.itemsize)
            .view(dtype)
            .as_strided(slot.shape, slot.stride)
        )
    return found


def _alone(raw, start: int, nbytes: int):
    """raw's bytes [start, start + nbytes) as a tensor whose storage is those bytes alone. An op may
    cost by its input's storage, not its elements: aten.copy of a view clones the view's whole
    storage (clone_preserve_strides), and over a region that is every slot of every call: on the CPU
    1273 ms for Qwen3.5's cache-slice copy in a 400 MB region against 55 ms over its own span; on the
    H200 eager read 2.64 ms (0.14 ms in the protocol before the referee) and a kernel beside it 56x."""
    import torch

    at = raw.storage_offset() + start
    storage = raw.untyped_storage()[at : at + nbytes]  # shares the region's memory, keeps it alive
    return torch.empty(0, dtype=torch.uint8, device=raw.device).set_(storage)


class WorkerGone(Exception):
    """The worker's process ended, or stopped answering within its time."""


class Link:
    """The referee's end of a worker's FIFOs: orders out, answers in, one JSON line each."""

    def __init__(self, folder: Path, owner: int | None = None):
        self.orders_path, self.answers_path = folder / "orders.fifo", folder / "answers.fifo"
        for path in (self.orders_path, self.answers_path):
            os.mkfifo(path, 0o600)
            if owner is not None and os.getuid() == 0:
                os.chown(path, owner, owner)
        # Read and write ends held here too: neither open blocks, and the worker's death shows as
        # its thread ending (alive()), not as an end of file the worker could fake by closing.
        self._orders = os.open(self.orders_path, os.O_RDWR)
        self._answers = os.open(self.answers_path, os.O_RDWR | os.O_NONBLOCK)
        self._buffer = b""

    def send(self, line: bytes) -> None:
        os.write(self._orders, line)

    def receive(self, deadline: float, alive: Callable[[], bool]) -> bytes:
        """The worker's next line; WorkerGone once it has ended or the deadline (monotonic) passed."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE:
                raise ProtocolError(f"an answer longer than {MAX_LINE} bytes")
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerGone("it did not answer in time")
            ready, _, _ = select.select([self._answers], [], [], min(left, 0.05))
            if ready:
                try:
                    self._buffer += os.read(self._answers, MAX_LINE)
                except BlockingIOError:
                    pass
            elif not alive():
                raise WorkerGone("its process ended")
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def close(self) -> None:
        for fd in (self._orders, self._answers):
            try:
                os.close(fd)
            except OSError:
                pass


class WorkerEnd:
    """A worker's end of its FIFOs (opened by the worker; the referee's end exists already)."""

    def __init__(self, folder: Path):
        self._orders = open(folder / "orders.fifo", "rb", buffering=0)  # noqa: SIM115 (held for the session)
        self._answers = os.open(folder / "answers.fifo", os.O_WRONLY)
        self._buffer = b""

    def receive(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = self._orders.read(MAX_LINE)
            if not chunk:
                raise EOFError("the referee closed the link")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def send(self, line: bytes) -> None:
        os.write(self._answers, line)


class LinkedWorker:
    """A worker running in a thread of ours (its sandbox's run), spoken to over its link."""

    def __init__(self, run: Callable[[], WorkerReport], link: Link, deadline: Callable[[], float]):
        self.link, self.deadline = link, deadline
        self._report: WorkerReport | None = None
        self.seconds: dict[str, float] = {}  # by order: where the session's time went (diagnosis)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(run,), daemon=True)
        self._thread.start()

    def _main(self, run: Callable[[], WorkerReport]) -> None:
        try:
            self._report = run()
        except BaseException as exc:  # handed to whoever asks for the report
            self._error = exc

    def ask(self, command: Command | None) -> Answer:
        start = time.perf_counter()
        if command is not None:
            self.link.send(encode(command))
        answer = decode(Answer, self.link.receive(self.deadline(), self._thread.is_alive))
        name = command.order.value if command is not None else "ready"
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        return answer

    def report(self) -> WorkerReport:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._report
