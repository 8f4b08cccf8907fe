"""`forgebench eval`: build, check and time one candidate against its task; prints an EvalResult."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.errors import ForgeBenchError


def add(sub) -> None:
    ev = sub.add_parser("eval", help="build, check and time one candidate; prints an EvalResult")
    ev.add_argument("--task", required=True, help="task id, task folder, or KernelBench-format .py file")
    ev.add_argument("--candidate", required=True, help="Python file defining ModelNew")
    ev.add_argument("--platform", default="cpu", help="cpu, cuda or triton (conf/platform/)")
    ev.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    ev.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a Hydra override")
    ev.set_defaults(handler=evaluate)


def evaluate(args: argparse.Namespace) -> int:
    from harness.config import compose, instantiate
    from harness.evaluate import Evaluator
    from harness.evaluate.settings import for_run
    from harness.tasks import resolve_one

    candidate = Path(args.candidate)
    if not candidate.is_file():
        raise ForgeBenchError(
            f"candidate file '{candidate}' does not exist; pass the path of a .py file defining ModelNew."
        )
    cfg = compose(platform=args.platform, overrides=args.override)
    task = resolve_one(args.task)
    platform = instantiate(cfg.platform, "platform")
    evaluator = Evaluator(
        platform,
        for_run(cfg),
        Path(cfg.run_root) / "eval" / time.strftime("%Y%m%d-%H%M%S"),
        Path(cfg.cache_dir),
    )
    result = evaluator.evaluate(task, candidate.read_text())
    print(result.to_json() if args.json else _describe(result))
    return 0


def _describe(result) -> str:
    lines = [f"{result.task} on {result.platform}: {result.summary()}"]
    for name, ms in result.baselines.items():
        lines.append(f"  {name}: {ms:.4g} ms")
    if result.phases:
        lines.append("  phases: " + ", ".join(f"{k} {v:.2f}" for k, v in result.phases.items()))
    return "\n".join(lines)
