"""Runs a worker in its own process: time limit, memory limit, scrubbed environment, own dirs."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Only these variables reach a worker: nothing that could hold a credential.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CC", "CXX", "OMP_NUM_THREADS",
              "PYTHONPATH", "VIRTUAL_ENV", "TRITON_INTERPRET", "LD_LIBRARY_PATH")


@dataclass(frozen=True)
class WorkerExit:
    returncode: int | None  # None: killed at the time limit
    log: str


def worker_env(workdir: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    home = workdir / "home"
    tmp = workdir / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def _limits(memory_bytes: int | None):
    def apply() -> None:
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault must not leave gigabytes of core

    return apply


def run_worker(request_path: Path, workdir: Path, timeout_s: float, memory_gb: float | None,
               extra_env: dict[str, str]) -> WorkerExit:
    """Run the worker to completion or to its time limit; its whole process group dies with it."""
    log_path = workdir / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.evaluate.worker", str(request_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=worker_env(workdir, extra_env), cwd=workdir, start_new_session=True,
            preexec_fn=_limits(int(memory_gb * 2**30) if memory_gb else None),
        )
        try:
            returncode: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # also ends threads and children left behind
            except ProcessLookupError:
                pass
            proc.wait()
    return WorkerExit(returncode, log_path.read_text(errors="replace"))


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the worker was killed by {name}"
    return f"the worker exited with status {returncode} before writing its result"
