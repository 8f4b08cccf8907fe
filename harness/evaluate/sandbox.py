"""Runs a worker in its own process: time limit, memory limit, scrubbed environment, own dirs,
Landlock confinement where the kernel has it (own folders writable, no other process inspectable),
and (when the harness runs as root) the unprivileged user nobody.

Workers are forked from a zygote (zygote.py) that imported torch once; each zygote serves one
evaluation at a time, and a pool grows to as many as run concurrently.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.evaluate.nobody import NOBODY, closed_to_others

# Only these variables reach a worker: nothing that could hold a credential.
PASSED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CC",
    "CXX",
    "OMP_NUM_THREADS",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "TRITON_INTERPRET",
    "LD_LIBRARY_PATH",
)


# Beside its own folders and the Python code its zygote loaded, a confined worker reads only the
# system's programs, libraries and settings: not the user's home, nor the folder the harness runs in.
SYSTEM_READS = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys")
# Device files are opened for writing too (/dev/null, /dev/shm, the GPU's /dev/nvidia*). The CUDA
# driver's cuInit fails (error 304) unless the process may write beneath /proc (its own /proc/<pid>
# entries; measured on the H200 with benchmarks/landlock_gpu_probe.py). Other processes' mem,
# environ and fd stay out of reach (Landlock refuses ptrace-mode access outside the worker's
# domain); their oom_score_adj and the like are guarded by file permissions only, and /proc/sys by
# root. So as root the workers must drop to nobody (platform.drop_privileges, on by default): a
# candidate kept as root could write /proc/sys and /dev, which no sandbox here contains.
SYSTEM_WRITES = ("/dev", "/proc")


@dataclass(frozen=True)
class Confinement:
    """What a confined worker may read and write (Landlock); everything else is refused."""

    read: tuple[str, ...]
    write: tuple[str, ...]

    @classmethod
    def for_worker(cls, workdir: Path, reads: list[Path], shared_dirs: list[Path]) -> Confinement:
        extra = [os.environ["CUDA_HOME"]] if "CUDA_HOME" in os.environ else []
        return cls(
            read=(*SYSTEM_READS, *extra, *map(str, reads)),
            write=(*SYSTEM_WRITES, str(workdir), *map(str, shared_dirs)),
        )


@dataclass(frozen=True)
class WorkerExit:
    returncode: int | None  # None: killed at the time limit
    log: str


# Thread pools sleep once their work is done instead of spin-waiting (OpenBLAS spins for 100 ms after
# a matmul by default): CPU still burning after forward returns is then the candidate's own work.
# In every process's start-up environment, since the libraries read them when they load (the
# zygote imports numpy's OpenBLAS before it forks a worker).
QUIET_POOLS = {
    "OMP_WAIT_POLICY": "PASSIVE",
    "GOMP_SPINCOUNT": "0",
    "KMP_BLOCKTIME": "0",
    "OPENBLAS_THREAD_TIMEOUT": "4",
}


def base_env() -> dict[str, str]:
    return {**{k: os.environ[k] for k in PASSED_ENV if k in os.environ}, **QUIET_POOLS}


def _hand_over(path: Path) -> None:
    """Let the unprivileged worker write here (only meaningful when we are root)."""
    if os.getuid() == 0:
        os.chown(path, NOBODY, NOBODY)


def close_to_workers(folder: Path) -> None:
    """Once its worker has ended, no other worker may enter the folder (its outputs are checked
    after): owned by us again, and private."""
    if os.getuid() == 0:
        os.chown(folder, 0, 0)
    folder.chmod(0o700)


def _refusal(closed: Path, holds: str) -> str:
    return (
        f"the unprivileged worker (user nobody) cannot enter {closed} (mode {closed.stat().st_mode & 0o777:o}), "
        f"which holds {holds}"
    )


def worker_folder(folder: Path) -> Path:
    """Where workers' folders go: `folder` when the unprivileged worker may reach it, else a folder
    of the same name under the system's temporary folder (a project in root's home, mode 700, runs
    as well). Nothing is created here. Only meaningful when we are root."""
    import hashlib
    import tempfile

    from harness.errors import ForgeBenchError

    closed_above = closed_to_others(folder) if os.getuid() == 0 else None
    if closed_above is None:
        return folder
    base = Path(tempfile.gettempdir()).resolve() / "forgebench-workers"
    closed = closed_to_others(base)
    if closed is not None and closed != base:
        raise ForgeBenchError(
            f"{_refusal(closed_above, str(folder))}, and {_refusal(closed, str(base))}; "
            "run from a folder others may enter, or set TMPDIR to one "
            "(platform.drop_privileges=false would run candidates as root, uncontained)."
        )
    return base / hashlib.sha256(str(folder).encode()).hexdigest()[:16] / folder.name


def make_worker_folder(folder: Path) -> None:
    """Create a folder worker_folder() chose, every new level open to pass through (not to list)."""
    for parent in reversed([folder, *folder.parents]):
        if not parent.exists():
            parent.mkdir(exist_ok=True)
            if os.getuid() == 0:
                parent.chmod(0o711)


def check_code_reachable() -> None:
    """Workers import the interpreter's packages and the harness as nobody (when we are root)."""
    import harness
    from harness.errors import ForgeBenchError

    if os.getuid() != 0:
        return
    for code, what in ((Path(sys.prefix), "the Python environment"), (Path(harness.__file__).parent, "the harness")):
        closed = closed_to_others(code.resolve())
        if closed is not None:
            raise ForgeBenchError(
                f"{_refusal(closed, f'{what} ({code}) that workers import')}; install it in a folder others "
                "may enter (python3 -m venv /opt/forgebench), or let them pass through (chmod o+x "
                f"{closed}); platform.drop_privileges=false would run candidates as root, uncontained."
            )


def prepare_workdir(
    workdir: Path, extra: dict[str, str], shared_dirs: list[Path], unprivileged: bool = True
) -> dict[str, str]:
    """The worker's environment, with its own HOME and TMPDIR inside workdir. An unprivileged
    worker (a candidate's) gets the folders handed to it and the caches opened to every worker;
    a trusted one (the reference's, which stays our user) keeps both private."""
    env = base_env()
    home, tmp = workdir / "home", workdir / "tmp"
    for folder in (home, tmp):
        folder.mkdir(parents=True, exist_ok=True)
        if unprivileged:
            _hand_over(folder)
    if unprivileged:
        _hand_over(workdir)
    for folder in shared_dirs:  # the worker's build caches (one candidate source's, or the reference's)
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        if unprivileged:
            _hand_over(folder)
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


_START_S = 180.0  # a zygote imports torch (and a wrapper starts first): seconds, not minutes


class _Zygote:
    def __init__(self, preload: list[str], wrapper: list[str], env: dict[str, str]):
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [*wrapper, sys.executable, "-m", "harness.evaluate.zygote", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**base_env(), **env, "PYTHONUNBUFFERED": "1"},
            text=True,
            start_new_session=True,
        )
        # Read on a thread, so a wrapper or zygote that never says it is ready cannot hang us.
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(self._answer()), daemon=True)
        reader.start()
        reader.join(_START_S)
        ready = lines[0] if lines else ""
        if not ready.strip().startswith('{"ready"'):
            self.close()
            raise RuntimeError(f"the worker zygote failed to start within {_START_S:g} s: {ready!r}")

    def _answer(self) -> str:
        """The zygote's next line ("" once it is gone); a wrapper (ncu) may print lines of its own
        on the same stream."""
        line = self.proc.stdout.readline()
        while line and not line.startswith("{"):
            line = self.proc.stdout.readline()
        return line

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, job: dict, started: Callable[[int], None] = lambda pid: None) -> dict:
        """Run a job; `started` is told the forked worker's pid (as the zygote saw it) once it exists."""
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        while True:
            answer = self._answer()
            if not answer:
                raise RuntimeError("the worker zygote died")
            message = json.loads(answer)
            if "started" not in message:
                return message
            started(int(message["started"]))

    def close(self, grace_s: float = 0.0) -> None:
        """Stop the zygote: at once, or (grace_s) by closing its input and waiting, so that a
        wrapper writes its report when the zygote exits."""
        if grace_s:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=grace_s)
                return
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


class ZygotePool:
    """Zygotes with `preload` imported; one per evaluation running at the same time. With a
    `wrapper` (ncu's command line) each zygote runs under it, and its workers keep the environment
    the wrapper gave the zygote (base_env plus `env` and the wrapper's own variables)."""

    def __init__(
        self,
        preload: list[str] | None = None,
        wrapper: list[str] | None = None,
        env: dict[str, str] | None = None,
    ):
        self.preload = list(preload or [])
        self.wrapper, self.env = list(wrapper or []), dict(env or {})
        self._zygotes: list[_Zygote] = []
        self._lock = threading.Lock()

    def _acquire(self) -> _Zygote:
        with self._lock:
            for zygote in self._zygotes:
                if zygote.alive() and zygote.lock.acquire(blocking=False):
                    return zygote
            self._zygotes = [z for z in self._zygotes if z.alive()]
            zygote = _Zygote(self.preload, self.wrapper, self.env)
            zygote.lock.acquire()
            self._zygotes.append(zygote)
            return zygote

    def run(
        self,
        request_path: Path,
        workdir: Path,
        timeout_s: float,
        memory_gb: float | None,
        env: dict[str, str],
        drop_privileges: bool,
        confinement: Confinement | None,
        processes: str = "visible",
        started: Callable[[int], None] = lambda pid: None,
        nice: int = 0,
    ) -> WorkerExit:
        """Run one worker to its end. `processes`: "own_namespace" (it sees itself alone), "hidden"
        (it sees its own user's processes only) or "visible" (as root only: zygote.py); `nice`: how
        much lower than this process's its scheduling priority is (os.nice)."""
        log_path = workdir / "worker.log"
        job = {
            "request_path": str(request_path),
            "workdir": str(workdir),
            "log_path": str(log_path),
            "timeout_s": timeout_s,
            "memory_bytes": int(memory_gb * 2**30) if memory_gb else None,
            "env": env,
            "drop_privileges": drop_privileges,
            "confinement": asdict(confinement) if confinement else None,
            "processes": processes,
            "nice": nice,
            "inherit_env": bool(self.wrapper),  # the wrapper's variables (ncu's injection) must reach cuInit
        }
        zygote = self._acquire()
        try:
            answer = zygote.run(job, started)
        finally:
            zygote.lock.release()
        log = log_path.read_text(errors="replace") if log_path.is_file() else ""
        if answer["timed_out"]:
            return WorkerExit(None, log)
        status = answer["status"]
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return WorkerExit(code, log)

    def close(self, grace_s: float = 0.0) -> None:
        with self._lock:
            for zygote in self._zygotes:
                zygote.close(grace_s)
            self._zygotes = []
