"""A helper process run in a process group of its own, and the whole group ended with it.

A process killed alone leaves its children running: on the H200, right after a model run was
stopped at its time limit, the next evaluation found 136 GiB of the GPU's memory held by another
process and ran out of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading

# Signals that end this process without unwinding it, sent to it alone or to its process group,
# which the helper's own session does not share: a terminal's hang-up, `timeout`'s and a CI's SIGTERM.
_ENDING = (signal.SIGTERM, signal.SIGHUP)


def run(command: list[str], timeout_s: float, **popen) -> int:
    """The command's exit status; subprocess.TimeoutExpired once it outlasts timeout_s. However this
    ends (a time limit, Ctrl-C, SIGTERM or SIGHUP to this process), every process of the command's
    group is killed and the command reaped before it returns or raises."""
    with _unwinding_on(_ENDING):
        proc = subprocess.Popen(command, start_new_session=True, **popen)
        try:
            return proc.wait(timeout=timeout_s)
        finally:
            _kill_group(proc.pid)
            proc.wait()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:  # the group is empty: everything in it has ended
        pass


@contextlib.contextmanager
def _unwinding_on(signals: tuple[signal.Signals, ...]):
    """Within: these signals raise SystemExit (so `finally` blocks run) instead of ending the process
    at once; handlers can be set only from the main thread, and elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def unwind(signum, frame):
        raise SystemExit(128 + signum)

    before = {s: signal.signal(s, unwind) for s in signals}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
