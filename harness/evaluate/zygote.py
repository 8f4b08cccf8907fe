"""A pre-loaded parent for workers: imports torch and the worker once, then forks one child per
evaluation, so a worker starts in milliseconds instead of seconds.

Started by sandbox.py with a scrubbed environment and made non-dumpable, so even a worker of its
own uid cannot read its /proc files; reads one JSON request per line on stdin and answers one
JSON line per finished child: {"status": waitpid status, "timed_out": bool}.
It never runs a torch op itself: a fork after OpenMP or CUDA start-up would break the child.
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import select
import signal
import site
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from harness.evaluate import confine, stdlib_copy
from harness.evaluate.nobody import NOBODY


def _code_roots() -> list[str]:
    """Where the Python code a worker may run lives: the interpreter's prefixes, the site folders,
    the folders on sys.path (packages put on PYTHONPATH, imported later), and the folder of every
    top-level package the zygote imported (harness/ of an editable install). Of sys.path, not the
    project's folder, the one the harness runs in or the home folder, nor any folder beneath or
    above them: each may hold a .env."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, site.getusersitepackages()}
    roots.update(site.getsitepackages())
    private = [Path(__file__).resolve().parents[2], Path.cwd().resolve(), Path.home().resolve()]
    for entry in sys.path:
        try:
            folder = Path(entry or ".").resolve()
            if not folder.is_dir():
                continue
        except OSError:  # a folder this user may not enter (a test's tmp beneath root's): not code it runs
            continue
        # Neither inside nor above them: PYTHONPATH=$HOME (or /) would open the .env beneath.
        if not any(folder.is_relative_to(p) or p.is_relative_to(folder) for p in private):
            roots.add(str(folder))
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        package_dirs, file = getattr(module, "__path__", None), getattr(module, "__file__", None)
        roots.update(package_dirs if package_dirs else [file] if file else [])
    return sorted(roots)


def _become_worker(job: dict, code_roots: list[str]) -> None:
    """In the child: own session, limits, environment, directory, log, (as root) no privileges, and
    (where the kernel has Landlock) no files but its own and no other process in reach."""
    os.setsid()
    os.chdir(job["workdir"])
    log = os.open(job["log_path"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(0)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault must not leave gigabytes of core
    if job.get("memory_bytes"):
        resource.setrlimit(resource.RLIMIT_AS, (job["memory_bytes"], job["memory_bytes"]))
    if job.get("nice"):  # set here, by trusted code; without privileges the worker cannot undo it
        os.nice(job["nice"])
    if not job.get("inherit_env"):  # a zygote under ncu was started with base_env plus ncu's own
        os.environ.clear()
    os.environ.update(job["env"])
    tempfile.tempdir = None  # the zygote's preloads fixed it at /tmp; the worker's TMPDIR is its own
    if job.get("processes") in ("own_namespace", "hidden") and os.getuid() == 0:
        try:
            confine.hide_other_processes(own_pid_namespace=job["processes"] == "own_namespace")
        except OSError as exc:  # a container without CAP_SYS_ADMIN: the worker sees other processes
            print(f"forgebench: other processes stay visible to this worker ({exc})", file=sys.stderr)
    if job.get("drop_privileges") and os.getuid() == 0:
        # As nobody the candidate cannot read root's processes (/proc/<pid>/environ) or files.
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    if os.environ.get(stdlib_copy.ENV):
        stdlib_copy.use(os.environ[stdlib_copy.ENV])
    if job.get("confinement"):
        confine.restrict([*job["confinement"]["read"], *code_roots], job["confinement"]["write"])


def _run_child(job: dict, code_roots: list[str]) -> None:
    code = 1
    try:
        _become_worker(job, code_roots)
        from harness.evaluate import worker

        code = worker.main(job["request_path"])
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the child's session: its threads and children too
    except (ProcessLookupError, PermissionError):
        pass


def _harness_gone(requests: select.poll) -> bool:
    """The harness holds the only writing end of this process's input, and sends nothing while a
    job runs: a hang-up there means it died (kill -9, a machine's limit). Its zygotes run in
    sessions of their own, so no signal to its group reaches them, and a worker left building or
    hanging would run on for its whole time limit, holding the harness's output open."""
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in requests.poll(0))


def _end_with_the_harness(pid: int) -> None:
    """The worker's session killed and every orphan reaped (the worker among them), then this zygote
    ends: nobody will read its answer."""
    _kill_session(pid)
    _reap_orphans()
    os._exit(0)


def _wait(pid: int, timeout_s: float, requests: select.poll) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        if _harness_gone(requests):
            _end_with_the_harness(pid)
        if time.monotonic() >= deadline:
            _kill_session(pid)
            return os.waitpid(pid, 0)[1], True
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _children() -> list[int]:
    """This process's children, from /proc (the fourth field of stat is the parent's pid)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == me:
            found.append(int(entry))
    return found


def _reap_orphans() -> None:
    """Kill whatever the worker left running outside its process group: a daemon it started with
    setsid would otherwise live on as nobody and tamper with later workers' folders. As the
    subreaper this process inherits every orphan, so after the worker its children are exactly
    those; a daemon that forks again hands its child up here too, hence the loop."""
    for _ in range(100):
        orphans = _children()
        if not orphans:
            return
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def serve() -> None:
    confine.make_undumpable()
    confine.make_subreaper()
    # Dynamo too: the first call under a dispatch mode (the op recorder's, in every worker) imports it,
    # 1.8 s of a core that a worker would otherwise pay after its fork, each time.
    for module in ["torch", "harness.evaluate.worker", "torch._dynamo", *sys.argv[1:]]:
        importlib.import_module(module)
    # Before any fork: a worker of a Python nobody may read asks sysconfig where the standard library
    # is (stdlib_copy.use) before it reads the copy, and sysconfig's data module lies beneath that folder.
    sysconfig.get_config_vars()
    code_roots = _code_roots()
    out = sys.stdout
    requests = select.poll()
    requests.register(sys.stdin.fileno(), select.POLLIN)
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _run_child(job, code_roots)
        try:
            print(json.dumps({"started": pid}), file=out, flush=True)  # for the referee's census (census.py)
            status, timed_out = _wait(pid, job["timeout_s"], requests)
            if not timed_out:
                _kill_session(pid)  # threads or children the worker left behind
            _reap_orphans()
            print(json.dumps({"status": status, "timed_out": timed_out}), file=out, flush=True)
        except BrokenPipeError:  # the harness died between two lines: nobody reads the answer
            _end_with_the_harness(pid)


if __name__ == "__main__":
    serve()
