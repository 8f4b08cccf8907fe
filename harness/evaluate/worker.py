"""The worker process: runs a reference or a candidate on seeded inputs, times it, writes its report.

Run as `python -m harness.evaluate.worker REQUEST.json`. Whatever the candidate does, this
process's exit is read by the parent (sandbox.py) as a verdict, never as a harness failure.
It imports only what it runs (torch, the device's adapter, the checks and the timing module):
none of the orchestration (the Evaluator, the sandbox, ncu, the task loader), so a GPU box needs
torch, triton and numpy alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from harness import devices
from harness.evaluate import timing
from harness.evaluate.candidate_run import run_build, run_under_ncu
from harness.evaluate.reference_run import run_reference
from harness.evaluate.report import WorkerReport
from harness.evaluate.session_run import serve_candidate, serve_reference
from harness.evaluate.verdict import HarnessFault, Verdict
from harness.reference import load_reference_module

_RUNNERS = {
    "reference": run_reference,
    "ncu": run_under_ncu,
    "build": run_build,
    "session_reference": serve_reference,
    "session_candidate": serve_candidate,
}


def main(request_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    result_path = Path(request["result_path"])
    device = devices.load(request["device"])
    # Bind the clocks before anything a candidate can touch is imported.
    timing.bind_clocks(device)
    started = timing._perf_counter()
    try:
        runner = _RUNNERS[request["mode"]]
        reference = load_reference_module(Path(request["reference_path"]))
        torch.set_grad_enabled(False)  # baselines and candidates are timed for inference
        # cuDNN's heuristic picks a different convolution algorithm from run to run (a 7x7 conv at
        # 26 us in one process, 50 us in the next); timing the choices, as servers do, is stable.
        torch.backends.cudnn.benchmark = True
        report = runner(request, device, reference)
    except Verdict as v:
        report = WorkerReport(v.verdict, v.reason)
    except HarnessFault as fault:
        report = WorkerReport("crash", fault.reason, harness_fault=fault.module)
    report.env = device.environment()
    report.wall_s = timing._perf_counter() - started
    result_path.write_text(report.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
