"""Whether work on a side stream, joined back before forward returns, escapes the timer: each
workload timed by timing.measure on the timed stream and again launched on a side stream that the
timed stream then waits for. The side stream does not wait for the L2 flush (or the GPU lead)
queued ahead of the start event, so its kernels may start during them; a ratio below 1 is time
the timer did not see. Also prints what the worker's escaped-work and hidden-work checks say.

    python3 benchmarks/side_stream_probe.py --out side_stream.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.evaluate import timing
from harness.evaluate.worker import _escaped_work, _hidden_work


def workloads(device: torch.device) -> dict:
    big = [torch.randn(4096, 4096, dtype=torch.bfloat16, device=device) for _ in range(2)]
    small = [torch.randn(2048, 2048, dtype=torch.bfloat16, device=device) for _ in range(2)]
    src = torch.randn(32 * 2**20, dtype=torch.bfloat16, device=device)  # 64 MB
    return {
        "matmul 4096^3 bf16": (torch.mm, big),
        "matmul 2048^3 bf16": (torch.mm, small),
        "copy 64 MB": (torch.clone, [src]),
    }


def on_side_stream(fn, side: torch.cuda.Stream):
    def joined(*args):
        timed = torch.cuda.current_stream()
        with torch.cuda.stream(side):  # waits for nothing queued on the timed stream
            out = fn(*args)
        timed.wait_stream(side)
        return out

    return joined


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    device = torch.device("cuda")
    side = torch.cuda.Stream()
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "workloads": {}}
    for name, (fn, inputs) in workloads(device).items():
        row = {}
        for lead in (False, True):
            own = timing.measure(fn, [inputs], device, budget_ms=200, gpu_lead=lead).median_ms
            hidden = timing.measure(on_side_stream(fn, side), [inputs], device, budget_ms=200, gpu_lead=lead).median_ms
            key = "lead" if lead else "no_lead"
            row[key] = {"own_stream_ms": own, "side_stream_ms": hidden, "side_over_own": hidden / own}
        # What the worker's hidden-work check sees: the GPU's busy time on all streams (CUPTI).
        for label, call in (("own", fn), ("side", on_side_stream(fn, side))):
            busy = min(timing.profiled_call(call, inputs)[1] for _ in range(2))
            event = row["no_lead"][f"{label}_stream_ms"]
            row[f"{label}_stream_busy_ms"] = busy
            row[f"{label}_stream_hidden_work_check"] = _hidden_work(busy, event) or "not flagged"
        escaped = _escaped_work(on_side_stream(fn, side), inputs, device, row["no_lead"]["side_stream_ms"])
        row["escaped_work_check"] = escaped or "not flagged"
        report["workloads"][name] = row
        print(name, json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
