"""Turnaround of one candidate on a big task: the reference once, then the same candidate evaluated
several times, each with its phases (docs/results.md: a 6 GB KernelBench task on the H200).

    python3 benchmarks/big_task_turnaround.py TASK CANDIDATE [--platform triton] [--times 2]
        [--override KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from harness.config import compose, instantiate
from harness.evaluate import Evaluator
from harness.evaluate.settings import for_run
from harness.tasks import resolve_one


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task")
    parser.add_argument("candidate")
    parser.add_argument("--platform", default="triton")
    parser.add_argument("--times", type=int, default=2)
    parser.add_argument("--override", action="append", default=["platform.baselines=[eager]"])
    args = parser.parse_args()
    cfg = compose(platform=args.platform, overrides=args.override)
    evaluator = Evaluator(
        instantiate(cfg.platform, "platform"),
        for_run(cfg),
        Path(cfg.run_root) / "turnaround" / time.strftime("%Y%m%d-%H%M%S"),
        Path(cfg.cache_dir),
    )
    task, source = resolve_one(args.task), Path(args.candidate).read_text()
    try:
        started = time.perf_counter()
        evaluator.reference(task)
        print(json.dumps({"reference_s": round(time.perf_counter() - started, 2)}))
        for i in range(args.times):
            started = time.perf_counter()
            result = evaluator.evaluate(task, source)
            phases = {k: round(v, 2) for k, v in result.phases.items()}
            took = round(time.perf_counter() - started, 2)
            print(json.dumps({"candidate": i + 1, "s": took, "verdict": result.verdict, "phases": phases}))
            print(json.dumps({"reason": result.reason[:300], "time_ms": result.time_ms}))
    finally:
        evaluator.close()


if __name__ == "__main__":
    main()
