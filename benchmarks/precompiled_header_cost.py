"""What the harness's precompiled torch/extension.h (harness/evaluate/precompiled.py) saves a
candidate's `load_inline` C++ build: cold builds of a small C++ extension, each from a new source,
alternately with the folder on CPATH and without (side by side, so the machine's load falls on
both), for each `extra_cflags` given, and the one-time cost of making the folder.

    python3 -m benchmarks.precompiled_header_cost [--rounds 2] [--out FILE.json]

Runs on a CPU (a C++ extension); on a GPU machine the same main.cpp is compiled for a CUDA
extension beside nvcc's .cu (benchmarks/load_inline_build_cost.py times that one step by step).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

SOURCE = r"""
#include <torch/extension.h>
torch::Tensor shift(torch::Tensor x) { return x + %d; }
"""


def build(number: int, extra_cflags: list[str], cpath: str | None) -> float:
    """Seconds of one cold load_inline build of a new source (its own folder, its own name)."""
    from torch.utils.cpp_extension import load_inline

    saved = os.environ.pop("CPATH", None)
    if cpath:
        os.environ["CPATH"] = cpath
    try:
        with tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            load_inline(
                f"pch_cost_{number}",
                SOURCE % number,
                functions=["shift"],
                extra_cflags=extra_cflags,
                build_directory=folder,
            )
            return time.perf_counter() - started
    finally:
        os.environ.pop("CPATH", None)
        if saved is not None:
            os.environ["CPATH"] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="builds of each kind per flag set (default 2)")
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args()
    import torch

    from harness.evaluate.precompiled import PrecompiledHeader

    header = PrecompiledHeader(True)
    started = time.perf_counter()
    folder = header.folder()
    made_s = time.perf_counter() - started
    if folder is None:
        raise SystemExit(f"no precompiled header: {header.failed}")
    figures = {"torch": torch.__version__, "cores": os.cpu_count(), "folder": str(folder), "ready_s": round(made_s, 1)}
    print(json.dumps(figures), flush=True)
    number = int(time.time()) % 100000 * 100  # new sources every run: nothing cached by torch
    for extra in ([], ["-O3"]):
        times: dict[str, list[float]] = {"plain": [], "precompiled": []}
        for _ in range(args.rounds):
            for kind, cpath in (("plain", None), ("precompiled", str(folder))):
                number += 1
                times[kind].append(build(number, extra, cpath))
        row = {k: round(statistics.median(v), 2) for k, v in times.items()}
        row["ratio"] = round(row["plain"] / row["precompiled"], 2)
        figures[" ".join(extra) or "default"] = row
        print(json.dumps({" ".join(extra) or "default": row}), flush=True)
    figures["load_average"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
