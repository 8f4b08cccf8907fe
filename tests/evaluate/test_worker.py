"""The candidate's worker: it imports none of the orchestration, its report of the wrong types is
refused, and it reads the standard library and Python's headers whoever runs the harness."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import serial
from harness.errors import ForgeBenchError
from harness.evaluate import stdlib_copy
from harness.evaluate.report import WorkerReport
from harness.tasks import resolve_one
from tests.test_suite import RMSNORM_SMALL


def test_a_forged_report_of_the_wrong_types_is_refused():
    good = WorkerReport("correct", torch_ops=["aten.mm"]).to_json()
    assert WorkerReport.from_json(good).verdict == "correct"
    for forged in (
        {"verdict": "correct", "torch_ops": "none"},
        {"verdict": "correct", "phases": {"build_s": "fast"}},
        {"verdict": "correct", "baselines": {"eager": [1]}},
        {"verdict": "perfect"},
        [],
    ):
        with pytest.raises(serial.RecordError):
            WorkerReport.from_json(json.dumps(forged))


def test_the_worker_imports_none_of_the_orchestration():
    probe = (
        "import sys, harness.evaluate.worker; "
        "print([m for m in ('harness.evaluate.evaluator', 'harness.evaluate.sandbox', 'harness.evaluate.ncu', "
        "'harness.evaluate.zygote', 'harness.tasks', 'harness.config', 'litellm', 'mlflow') if m in sys.modules])"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", loaded


CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


@pytest.mark.slow
def test_a_load_inline_candidate_is_correct_whoever_runs_the_harness(make_evaluator):
    # As root with Python in a folder nobody may enter (a pyenv in /root), the workers read the
    # standard library and Python.h from the harness's copy of them.
    # The worker's default time: a cold load_inline build beside CI's other workers on two cores can
    # pass the tests' 60 s (77 s once), which says nothing of who runs the harness.
    evaluator = make_evaluator(timeout_s=300)
    result = evaluator.evaluate(resolve_one(str(RMSNORM_SMALL)), (CANDIDATES / "rmsnorm_load_inline.py").read_text())
    assert result.verdict == "correct", result.reason


@pytest.mark.skipif(not stdlib_copy.needed(), reason="Python here is readable by the workers' user")
def test_a_worker_that_cannot_read_the_standard_library_is_the_harness_fault(make_evaluator, monkeypatch):
    monkeypatch.setattr(stdlib_copy, "needed", lambda: False)  # as the harness was before the copy
    # (Without the precompiled header: the worker fails before any build, which need not wait for it.)
    evaluator = make_evaluator(overrides=("platform.precompiled_header=false",))
    with pytest.raises(ForgeBenchError, match="the harness's fault, not the candidate's"):
        evaluator.evaluate(resolve_one(str(RMSNORM_SMALL)), (CANDIDATES / "rmsnorm_load_inline.py").read_text())
