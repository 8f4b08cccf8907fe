"""How the L2 flush before each timed call changes a memory-bound kernel's time: a device copy of
several sizes timed by timing.measure with the "read" flush and with the "write" one (a memset, as
triton.testing.do_bench does), alternated so clock drift falls on both.

    python3 benchmarks/l2_flush_probe.py --out flush.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.evaluate import timing

SIZES_MB = (4, 16, 50, 100, 400)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda")
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "copies": {}}
    for mb in SIZES_MB:
        src = torch.randn(mb * 2**20 // 2, dtype=torch.bfloat16, device=device)
        dst = torch.empty_like(src)
        times: dict[str, list[float]] = {"read": [], "write": []}
        for _ in range(args.repeats):
            for mode in times:
                measured = timing.measure(dst.copy_, [[src]], device, budget_ms=200, flush=mode)
                times[mode].append(measured.median_ms)
        row = {mode: statistics.median(t) for mode, t in times.items()}
        row["read_TBps"] = 2 * src.nbytes / row["read"] / 1e9
        row["write_TBps"] = 2 * src.nbytes / row["write"] / 1e9
        row["write_over_read"] = row["write"] / row["read"]
        report["copies"][f"{mb} MB"] = row
        print(mb, "MB", json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
