"""A helper process run in a process group of its own, and the whole group ended with it.

A process killed alone leaves its children running: on the H200 a model run stopped at its time
limit left a process holding 136 GiB of the GPU's memory, and the next evaluation ran out of it.
"""

from __future__ import annotations

import os
import signal
import subprocess


def run(command: list[str], timeout_s: float, **popen) -> int:
    """The command's exit status; subprocess.TimeoutExpired once it outlasts timeout_s. Either way,
    every process of its group is killed and the command reaped before this returns."""
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
