"""Compare two captures of one model ("capturing a model twice gives the same task set,
with shares within 10%"): the task sets, and each common task's share in both.

    python benchmarks/capture_stability.py tasks/qwen35/manifest.yaml /tmp/cap2/qwen35/manifest.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml


def _tasks(path: Path) -> dict[str, float]:
    data = yaml.safe_load(path.read_text())
    return {t["id"]: t["time_share"] for t in [*data.get("tasks", []), *data.get("fused_tasks", [])]}


def compare(first: Path, second: Path, tolerance: float) -> dict:
    a, b = _tasks(first), _tasks(second)
    common = sorted(set(a) & set(b), key=lambda t: -a[t])
    spread = {t: abs(a[t] - b[t]) / max(a[t], b[t]) for t in common}
    only = {"first": sorted(set(a) - set(b)), "second": sorted(set(b) - set(a))}
    # A task the cut admits in one capture only sits at the threshold: report how close it was.
    edge = max([a[t] for t in only["first"]] + [b[t] for t in only["second"]], default=0.0)
    return {
        "first": str(first),
        "second": str(second),
        "tasks": [len(a), len(b)],
        "common": len(common),
        "only_in_one": only,
        "largest_share_only_in_one": edge,
        "max_relative_share_difference": max(spread.values(), default=0.0),
        "tasks_beyond_tolerance": {t: round(spread[t], 4) for t in common if spread[t] > tolerance},
        "share_weighted_difference": sum(abs(a[t] - b[t]) for t in common),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.10, help="largest relative share difference")
    args = parser.parse_args()
    report = compare(args.first, args.second, args.tolerance)
    print(json.dumps(report, indent=1))
    same_set = not report["only_in_one"]["first"] and not report["only_in_one"]["second"]
    return 0 if same_set and not report["tasks_beyond_tolerance"] else 1


if __name__ == "__main__":
    sys.exit(main())
