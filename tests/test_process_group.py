"""A helper process and every process it started end together (harness/process_group.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

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
