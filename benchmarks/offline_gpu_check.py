"""The offline model's candidates on a GPU: for each task, its default candidate (and with --rounds N,
the points a refine loop would try next), evaluated by the project's Evaluator.

From the repository root on the GPU machine (needs torch, triton, numpy; not litellm or mlflow):

    python3 benchmarks/offline_gpu_check.py tasks/handwritten_gpu --out offline_gpu.json
    python3 benchmarks/offline_gpu_check.py 'tasks/qwen35/*' tasks/sd35 --rounds 4 --out check.json \
        --override platform.drop_privileges=false

Arguments are task folders, folders holding task folders, globs of either, or task ids/patterns.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.config import compose, instantiate  # noqa: E402
from harness.evaluate import EvalSettings, Evaluator  # noqa: E402
from harness.llm.base import extract_code  # noqa: E402
from harness.llm.offline import OfflineModel  # noqa: E402
from harness.prompts import approach_line, build_messages  # noqa: E402
from harness.tasks import Task, load_task_dir, select  # noqa: E402


def tasks_named(specs: list[str]) -> list[Task]:
    """Task folders found under each path or glob; anything else is a task id pattern."""
    found: dict[str, Task] = {}
    for spec in specs:
        paths = [Path(p) for p in glob.glob(spec)] or [Path(spec)]
        folders = sorted({y.parent for p in paths if p.exists() for y in [p / "task.yaml", *p.rglob("task.yaml")]})
        folders = [f for f in folders if (f / "task.yaml").is_file()]
        tasks = [load_task_dir(f) for f in folders] if folders else select(spec)
        found.update({t.id: t for t in tasks})
    return list(found.values())


def evaluator(platform: str, overrides: list[str], out_dir: Path) -> tuple[Evaluator, object]:
    from omegaconf import OmegaConf

    cfg = compose(platform=platform, overrides=overrides)
    entry = instantiate(cfg.platform, "platform")
    work = out_dir / time.strftime("offline-gpu-%Y%m%d-%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o711)  # workers may run as nobody
    settings = EvalSettings(**OmegaConf.to_container(cfg.evaluate))
    return Evaluator(entry, settings, work / "work", Path(cfg.cache_dir)), entry


def check(task: Task, ev: Evaluator | None, platform, rounds: int, keep: Path | None) -> list[dict]:
    """Evaluate the offline model's answers for `rounds` rounds: a new candidate, then refinements of
    the fastest correct one, as the refine agent would ask for them. Without an evaluator (--dry-run)
    only the default candidate is written."""
    model, records, attempts = OfflineModel(), [], []
    best: tuple[float, str, str] | None = None  # (speedup, source, outcome)
    for round_ in range(rounds):
        if best is None:
            messages = build_messages(task, platform, "new", attempts)
        else:
            messages = build_messages(task, platform, "refine", attempts, best[1], best[2])
        text = model.complete(messages).text
        code = extract_code(text)
        if code is None:
            records.append({"task": task.id, "round": round_, "declined": text})
            break
        if keep is not None:
            (keep / f"{task.id}.{round_}.py").write_text(code)
        if ev is None:
            records.append({"task": task.id, "round": round_, "approach": approach_line(code), "written": True})
            break
        result = ev.evaluate(task, code)
        attempts.append((code, result.summary()))
        record = {"task": task.id, "round": round_, "approach": approach_line(code), **result.to_dict()}
        records.append(record)
        if result.correct and (best is None or result.speedup_vs_eager > best[0]):
            best = (result.speedup_vs_eager, code, result.summary())
    return records


def _fmt(value, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="+", help="task folders, globs of them, or task id patterns")
    parser.add_argument("--out", required=True, help="JSON file for every record")
    parser.add_argument("--platform", default="triton", choices=["triton", "cuda"])
    parser.add_argument("--rounds", type=int, default=1, help="candidates per task (1: the default point only)")
    parser.add_argument("--candidates", help="folder to write every candidate into")
    parser.add_argument("--dry-run", action="store_true", help="write the candidates, evaluate nothing (no GPU)")
    parser.add_argument(
        "--override", action="append", default=[], help="Hydra override, e.g. platform.baselines=[eager]"
    )
    args = parser.parse_args()
    out = Path(args.out)
    keep = Path(args.candidates) if args.candidates else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    if args.dry_run:
        ev, platform = None, instantiate(compose(platform=args.platform, overrides=args.override).platform, "platform")
    else:
        ev, platform = evaluator(args.platform, args.override, out.resolve().parent)
    records: list[dict] = []
    print(f"{'task':60} {'approach':60} {'verdict':14} {'eager':>7} {'compile':>7} {'sol':>6}")
    try:
        for task in tasks_named(args.tasks):
            for r in check(task, ev, platform, args.rounds, keep):
                records.append(r)
                if "declined" in r:
                    print(f"{task.id:60} declined: {r['declined'][:200]}")
                    continue
                if r.get("written"):
                    print(f"{task.id:60} {r['approach'][:60]:60} written")
                    continue
                print(
                    f"{task.id:60} {r['approach'][:60]:60} {r['verdict']:14} {_fmt(r['speedup_vs_eager']):>7} "
                    f"{_fmt(r['speedup_vs_compile']):>7} {_fmt(r['sol_fraction'], '.0%'):>6}"
                )
                if not r["correct"]:
                    print(f"    {r['reason'][:600]}")
                out.write_text(json.dumps(records, indent=1))
    finally:
        if ev is not None:
            ev.close()
    out.write_text(json.dumps(records, indent=1))
    print(f"{len(records)} records in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
