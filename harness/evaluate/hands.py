"""The referee's hands on a call's memory, and its hold on the candidate's processes (referee.py).

HostHands: on a device whose memory the referee maps (the CPU), every copy and comparison of a call's
inputs and outputs done in the referee's own process. DeviceHands: where only a device's process can
touch the memory (a GPU), the reference session does them on the referee's orders, the inputs staged
masked before the bracket under a secret key. Freezer: the candidate's processes stopped outside its
own calls.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import numpy

from harness.evaluate.arena import Region
from harness.evaluate.protocol import Answer, Command, Layout, Order


def secret_seed() -> int:
    """A seed from the operating system's randomness, never written where a worker can read it first."""
    return int.from_bytes(os.urandom(8), "little") >> 1


class HostHands:
    """The referee's own hands, on a device whose memory it maps (the CPU): every copy and comparison
    of a call's inputs and outputs done in this process."""

    def __init__(self, reference_folder: Path, candidate_folder: Path, layout: Layout, owner: int | None):
        regions = {n: Region(reference_folder / f"{n}.bin") for n in ("pristine", "working", "got")}
        self.pristine, self.working = regions["pristine"].array(), regions["working"].array()
        self.got, self.layout = regions["got"].array(), layout
        c_in = Region(candidate_folder / "call_inputs.bin", layout.input_bytes, create=True, owner=owner)
        c_out = Region(candidate_folder / "call_outputs.bin", layout.output_bytes, create=True, owner=owner)
        self.c_in, self.c_out = c_in.array(), c_out.array()

    def before(self, into: str, calls: int) -> int:
        """Nothing before the bracket on the host: no key."""
        return 0

    def within(self, into: str, calls: int) -> None:
        """The inputs copied into the worker's memory, inside the bracket."""
        n = self.layout.input_bytes
        (self.working if into == "working" else self.c_in)[:n] = self.pristine[:n]

    def take(self, calls: int) -> str | None:
        """The candidate's outputs copied out of its reach; why its inputs are not as written, or None."""
        m = self.layout.output_bytes
        self.got[:m] = self.c_out[:m]
        changed = self._changed_input()
        if changed is None:
            return None
        return f"input {changed} was modified by forward; inputs must be left unchanged"

    def _changed_input(self) -> int | None:
        n = self.layout.input_bytes
        if numpy.array_equal(self.c_in[:n], self.pristine[:n]):
            return None
        for i, slot in enumerate(self.layout.inputs):
            if slot is None:
                continue
            span = slice(slot.offset, slot.offset + slot.extent * _itemsize(slot.dtype))
            if not numpy.array_equal(self.c_in[span], self.pristine[span]):
                return i
        return -1


class DeviceHands:
    """The reference session's hands, on the referee's orders, for memory only a device's process can
    touch: inputs staged (masked) into the slots, outputs taken out of the candidate's, inputs compared."""

    def __init__(self, ask: Callable[[Command], Answer]):
        self.ask = ask  # an order to the reference session, its answer back

    def before(self, into: str, calls: int) -> int:
        """The inputs staged into the slots before the bracket, masked with a secret key (session_run.mask),
        which the call unmasks them with inside it: copied in by another process inside the bracket,
        they cost the candidate a switch of the GPU between processes' contexts that eager never pays
        (measured on the H200: about a millisecond a bracket). The key (never 0)."""
        key = secret_seed() | 1
        self.ask(Command(Order.STAGE, calls=calls, into=into, key=key))
        return key

    def within(self, into: str, calls: int) -> None:
        """Nothing: the call unmasks its inputs itself."""

    def take(self, calls: int) -> str | None:
        answer = self.ask(Command(Order.TAKE, calls=calls))
        return None if answer.ok else answer.reason


class Freezer:
    """The candidate's worker and every process it started, stopped (SIGSTOP) outside its own calls:
    a thread or a child of it that burned the CPU, or launched work, while eager or the blank bracket
    ran would slow them and so raise its speedup. Work it left queued on a device runs on; the
    device's eager-alone times bound that (referee.Session._solo_eager)."""

    _WAIT_S = 0.05

    def __init__(self) -> None:
        self.pid: int | None = None
        self._stopped: list[int] = []

    def _tree(self) -> list[int]:
        found, todo = [], [self.pid]
        while todo and len(found) < 4096:
            pid = todo.pop()
            found.append(pid)
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    todo += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            except OSError:
                continue
        return found

    def freeze(self) -> None:
        if self.pid is None:
            return
        for pid in self._tree():
            try:
                os.kill(pid, signal.SIGSTOP)
                self._stopped.append(pid)
            except OSError:
                pass
        until = time.monotonic() + self._WAIT_S
        while time.monotonic() < until and not all(_stopped(pid) for pid in self._stopped):
            time.sleep(0.0002)

    def thaw(self) -> None:
        for pid in self._stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
        self._stopped = []


def _stopped(pid: int) -> bool:
    """Whether every thread of the process is stopped (or the process is gone)."""
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            if stat[stat.rindex(")") + 2] not in "tTXZ":
                return False
    except (OSError, ValueError):
        return True
    return True


def _itemsize(dtype: str) -> int:
    from harness.evaluate.outputs import DTYPES

    return DTYPES[dtype].itemsize
