"""The sandbox as a candidate sees it: no credential is reachable, whichever route it takes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CANDIDATES = Path(__file__).parent / "candidates"


@pytest.mark.skipif(os.getuid() != 0, reason="workers drop to the user nobody only when the harness runs as root")
def test_api_key_in_the_harness_start_up_environment_is_not_readable(tmp_path):
    """The key is in the harness process's start-up environment (/proc/<pid>/environ), where
    setting os.environ afterwards cannot remove it: the candidate must still not read it."""
    snoop = tmp_path / "snoop.py"
    snoop.write_text((CANDIDATES / "rmsnorm_cpp.py").read_text() + (CANDIDATES / "snoops_proc_environ.py").read_text())
    tmp_path.chmod(0o711)
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-not-a-real-key", "FORGEBENCH_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "eval",
            "--task",
            "rmsnorm_qwen",
            "--candidate",
            str(snoop),
            "--json",
            "--override",
            "evaluate.budget_ms=20",
            "--override",
            "evaluate.check_seeds=[1]",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "correct", result["reason"]
