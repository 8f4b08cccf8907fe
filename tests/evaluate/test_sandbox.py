"""The sandbox as a candidate sees it: no credential is reachable, whichever route it takes."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.evaluate import confine
from tests.test_suite import RMSNORM_SMALL

CANDIDATES = Path(__file__).parents[1] / "candidates"


def _eval_rmsnorm(candidate: Path, *overrides: str) -> list[str]:
    """`forgebench eval` of an RMSNorm candidate, as a user types it (a small task: the routes to a
    credential are under test, not the kernel)."""
    given = [arg for override in overrides for arg in ("--override", override)]
    cli = [sys.executable, "-m", "forgebench.cli"]
    return [*cli, "eval", "--task", str(RMSNORM_SMALL), "--candidate", str(candidate), *given]


@pytest.mark.skipif(os.getuid() != 0, reason="workers drop to the user nobody only when the harness runs as root")
@pytest.mark.slow
def test_api_key_in_the_harness_start_up_environment_is_not_readable(tmp_path):
    """The key is in the harness process's start-up environment (/proc/<pid>/environ), where
    setting os.environ afterwards cannot remove it: the candidate must still not read it."""
    snoop = tmp_path / "snoop.py"
    snoop.write_text((CANDIDATES / "rmsnorm_cpp.py").read_text() + (CANDIDATES / "snoops_proc_environ.py").read_text())
    tmp_path.chmod(0o711)
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-not-a-real-key", "FORGEBENCH_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [*_eval_rmsnorm(snoop, "evaluate.budget_ms=20", "evaluate.check_seeds=[1]"), "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "correct", result["reason"]


FAKE_KEY = "sk-forgebench-fake-0123456789"
# The worker's ancestors, counted up from it: the zygote, the harness, then the shell that started it.
SHELL = "ancestor3"


def _as_unprivileged_user(command: list[str], folder: Path) -> list[str]:
    """The command as a user without privileges: itself when the tests run as one, else the user
    nobody (setpriv), shown the interpreter in a private mount namespace when a folder above it
    (root's home) shuts others out. The harness then runs as the same uid as its workers."""
    if os.getuid() != 0:
        return command
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        pytest.skip("running the harness as an unprivileged user from root needs unshare and setpriv")
    prefix = Path(sys.base_prefix).resolve()
    blocked = next((p for p in reversed(prefix.parents) if not p.stat().st_mode & 0o001), None)
    stage = folder / "interpreter"
    stage.mkdir()
    show_interpreter = (
        f"mount --bind {prefix} {stage} && mount -t tmpfs -o mode=755 tmpfs {blocked} && "
        f"mkdir -p {prefix} && mount --bind {stage} {prefix} && "
        if blocked
        else ""
    )
    script = show_interpreter + 'exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *command]


def _worker_hunts(folder: Path) -> list[dict]:
    logs = sorted((folder / "runs").glob("eval/*/candidates/*/*/worker.log"))
    return [json.loads(line[5:]) for log in logs for line in log.read_text().splitlines() if line.startswith("HUNT ")]


@pytest.mark.parametrize("landlock", [True, False], ids=["landlock", "no-landlock"])
@pytest.mark.slow
def test_a_harness_run_by_a_normal_user_leaks_no_credential(tmp_path, landlock):
    """The harness runs as a normal user, so its workers share its uid. The key is in the start-up
    environment of the harness and of the shell that started it, in the user's ~/.env and in a .env
    in the folder the harness runs in; the candidate hunts it by every route (hunts_credentials.py).
    With Landlock every route is closed. Without it the harness, zygote and judge are still
    non-dumpable (their /proc files and ptrace closed), but the shell and the files stay readable:
    the hunter finding them there shows its routes work."""
    if landlock and not confine.landlock_abi():
        pytest.skip("this kernel has no Landlock")
    folder = tmp_path / "user"
    home = folder / "home"
    home.mkdir(parents=True)
    planted = [home / ".env", folder / ".env"]
    for path in planted:
        path.write_text(f"OPENAI_API_KEY={FAKE_KEY}\n")
    snoop = folder / "snoop.py"
    snoop.write_text(
        (CANDIDATES / "rmsnorm_cpp.py").read_text()
        + f"\nPLANTED_FILES = {[str(p) for p in planted]!r}\n"
        + (CANDIDATES / "hunts_credentials.py").read_text()
    )
    if os.getuid() == 0:
        tmp_path.chmod(0o711)
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, 65534, 65534)
    harness = [sys.executable, "-m", "forgebench.cli", "eval", "--task", str(RMSNORM_SMALL), "--candidate", str(snoop)]
    harness += ["--json", "--override", "evaluate.budget_ms=20", "--override", "evaluate.check_seeds=[1]"]
    harness += ["--override", f"platform.confine={str(landlock).lower()}"]
    # A shell that stays the harness's parent (it does not exec the last command): a same-uid ancestor.
    shell = ["sh", "-c", 'cd "$0" && "$@"; exit $?', str(folder), *harness]
    env = {
        **{k: os.environ[k] for k in ("PATH", "LANG", "VIRTUAL_ENV") if k in os.environ},
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "HOME": str(home),
        "OPENAI_API_KEY": FAKE_KEY,
        "FORGEBENCH_CACHE": str(folder / "cache"),
    }
    done = subprocess.run(_as_unprivileged_user(shell, tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "correct", result["reason"]
    (hunt,) = _worker_hunts(folder)
    found = sorted(route for route, outcome in hunt.items() if outcome.startswith("FOUND"))
    if landlock:
        assert found == [], hunt
    else:
        open_routes = [
            f"{SHELL} environ",
            f"{SHELL} mem",
            f"{SHELL} ptrace",
            f"{SHELL} cwd .env",
            "every process environ",
        ]
        assert found == sorted(open_routes + [f"file {p}" for p in planted]), hunt
    assert FAKE_KEY not in done.stdout + done.stderr


def test_confined_workers_read_packages_on_pythonpath_but_not_the_project_or_the_run_folder(tmp_path, monkeypatch):
    """Packages carried on PYTHONPATH (jinja2 for torch.compile on the GPU box) must be readable
    by a confined worker; the project, the folder the harness runs in and the home folder, where a
    .env may lie, must not be, nor anything beneath or above them (PYTHONPATH=$HOME, or /)."""
    from harness.evaluate import zygote

    project = Path(zygote.__file__).resolve().parents[2]
    carried, run_folder, home = tmp_path / "site", tmp_path / "run", tmp_path / "home"
    for folder in (carried, run_folder / "sub", home / "lib"):
        folder.mkdir(parents=True)
    monkeypatch.chdir(run_folder)
    monkeypatch.setenv("HOME", str(home))
    entries = [run_folder / "sub", project, project / "docs", project.parent, home, home / "lib", Path("/")]
    monkeypatch.setattr(sys, "path", [str(carried), "", *map(str, entries), *sys.path])
    roots = zygote._code_roots()
    assert str(carried) in roots
    for private in (run_folder, *entries):
        assert str(private) not in roots, private
    assert str(project / "harness") in roots  # the package itself, as an editable install has it


def test_a_worker_makes_its_temporary_files_in_its_own_folder(tmp_path, monkeypatch):
    """The zygote's preloads (Triton, torch) fix tempfile's folder at /tmp before any fork; a
    confined worker may not write there, so each worker must use its own TMPDIR."""
    from harness.evaluate import zygote

    tmp, answer = tmp_path / "tmp", tmp_path / "answer"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")  # as a preload leaves it
    job = {"workdir": str(tmp_path), "log_path": str(tmp_path / "log"), "env": {"TMPDIR": str(tmp)}}
    pid = os.fork()
    if pid == 0:  # the worker
        try:
            zygote._become_worker(job, [])
            answer.write_text(tempfile.mkdtemp())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert Path(answer.read_text()).parent == tmp


def _parents() -> dict[int, int]:
    """Each process's parent, from /proc (the fourth field of stat)."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    return parents


def _descendants(root: int, parents: dict[int, int] | None = None) -> set[int]:
    """Every process below `root`."""
    parents = _parents() if parents is None else parents
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_harness_killed_while_its_candidate_hangs_leaves_no_process_behind(tmp_path):
    # Zygotes run in sessions of their own, out of reach of a signal to the harness's group (a
    # machine's limit, kill -9): each must see its harness gone and end its worker, not let it run on
    # to its time limit, building or hanging and holding the harness's output open.
    tmp_path.chmod(0o711)
    harness = subprocess.Popen(
        _eval_rmsnorm(CANDIDATES / "hangs.py", "evaluate.timeout_s=240"),
        cwd=tmp_path,
        env={**os.environ, "FORGEBENCH_CACHE": str(tmp_path / "cache")},
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "harness.log").open("w"),
    )
    deadline = time.monotonic() + 180
    try:
        # Both sessions' workers forked (the reference's and the candidate's), then a moment for the
        # candidate to reach its hang.
        while time.monotonic() < deadline and len(_zygotes_at_work(harness.pid)) < 2:
            time.sleep(0.5)
        time.sleep(5)
        left = _descendants(harness.pid)
        assert len(left) >= 4, (tmp_path / "harness.log").read_text()[-2000:]
    finally:
        harness.kill()
        harness.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(pid) for pid in left):
        time.sleep(0.2)
    assert not [pid for pid in left if _alive(pid)], "processes of the killed harness still run"


def _zygotes_at_work(harness: int) -> list[int]:
    """The harness's zygotes that have forked a worker."""
    parents = _parents()
    children = [pid for pid, parent in parents.items() if parent == harness]
    return [pid for pid in children if "harness.evaluate.zygote" in _command(pid) and _descendants(pid, parents)]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
