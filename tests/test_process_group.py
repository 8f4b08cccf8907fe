"""A helper process and every process it started end together (harness/process_group.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import process_group

# Starts a child that would sleep for a minute, says its pid, then sleeps or exits.
LEAVES_A_CHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen(['sleep', '60'])\n"
    "open(sys.argv[1], 'w').write(str(child.pid))\n"
    "time.sleep(float(sys.argv[2]))\n"
)


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie until its parent (here: init, or this test's process) reaps it
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(") ")[1].startswith("Z"):
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


# The harness's side: runs the command above through process_group.run with a long limit.
RUNS_IT = (
    "import sys\n"
    "from harness import process_group\n"
    "process_group.run([sys.executable, '-c', sys.argv[1], sys.argv[2], '60'], timeout_s=120)\n"
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_harness_ended_by_a_signal_ends_the_helpers_group_first(tmp_path, signum):
    said = tmp_path / "child.pid"
    harness = subprocess.Popen(
        [sys.executable, "-c", RUNS_IT, LEAVES_A_CHILD, str(said)], cwd=Path(__file__).resolve().parents[1]
    )
    deadline = time.monotonic() + 60
    while not said.exists() or not said.read_text():
        assert time.monotonic() < deadline and harness.poll() is None
        time.sleep(0.05)
    harness.send_signal(signum)
    assert harness.wait(timeout=30) == 128 + signum
    assert _gone(int(said.read_text()))


@pytest.mark.parametrize("sleep_s", ["30", "0"], ids=["stopped at its limit", "exits by itself"])
def test_the_helpers_children_end_with_it(tmp_path, sleep_s):
    said = tmp_path / "child.pid"
    command = [sys.executable, "-c", LEAVES_A_CHILD, str(said), sleep_s]
    if sleep_s == "0":
        assert process_group.run(command, timeout_s=30) == 0
    else:
        with pytest.raises(subprocess.TimeoutExpired):
            process_group.run(command, timeout_s=2)
    assert _gone(int(said.read_text()))
