"""`forgebench regrade DIR`: grade a folder of KernelBench-format solutions published by another
system against their problems, on this machine, SWE-bench style.

Solutions pair with problems by name: a file named like its problem (`23_Softmax.py`), or
KernelBench's runs layout (`level_1_problem_23_sample_0_kernel.py`). Builds run in parallel across
the cores first (each in a sandboxed worker, filling the content-addressed build caches); the
evaluations then run one at a time, so no timing shares the machine with another. When the folder
states the speedups its authors claim (`claims.json`: {solution stem: speedup}, or KernelBench's
`eval_results.json` with runtime and ref_runtime), each is shown beside the measured one.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ForgeBenchError
from harness.tasks import Task, resolve_one

_RUNS_LAYOUT = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel")
# What a table cell shows where a failed solution has no figure (report.json holds null).
NO_FIGURE = "—"
# The longest reason a table cell or a progress line shows: its first line, cut here (report.json
# keeps the whole reason).
REASON_CHARS = 200


@dataclass(frozen=True)
class Pair:
    solution: Path
    problem: Path


def _problems(root: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted(root.rglob("*.py"))}


def pair(solutions: Path, problems_root: Path) -> tuple[list[Pair], list[str]]:
    """Each solution with its problem, and a sentence for every solution that has none."""
    problems = _problems(problems_root)
    by_number: dict[tuple[str, str], Path] = {}
    for stem, path in problems.items():
        number = stem.split("_", 1)[0]
        by_number[(path.parent.name.removeprefix("level"), number)] = path
    pairs, unmatched = [], []
    for solution in sorted(solutions.glob("*.py")):
        stem, layout = solution.stem, _RUNS_LAYOUT.fullmatch(solution.stem)
        problem = problems.get(stem)
        if problem is None and layout:
            problem = by_number.get((layout[1], layout[2]))
        if problem is None:
            number = stem.split("_", 1)[0]
            matches = [p for s, p in problems.items() if s.split("_", 1)[0] == number and s in stem]
            problem = matches[0] if len(matches) == 1 else None
        if problem is None:
            unmatched.append(f"{solution.name}: no problem under {problems_root} has its name")
        else:
            pairs.append(Pair(solution, problem))
    return pairs, unmatched


def claims(solutions: Path) -> dict[str, float]:
    """The speedups the folder claims, by solution stem (none when it states none)."""
    stated: dict[str, float] = {}
    path = solutions / "claims.json"
    if path.is_file():
        data = json.loads(path.read_text())
        stated.update({str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))})
    results = solutions / "eval_results.json"
    if results.is_file():
        data = json.loads(results.read_text())
        for key, entry in data.items() if isinstance(data, dict) else []:
            entries = entry if isinstance(entry, list) else [entry]
            for item in entries:
                if isinstance(item, dict) and item.get("runtime") and item.get("ref_runtime"):
                    stated[str(key)] = float(item["ref_runtime"]) / float(item["runtime"])
    return stated


def _claim_for(pair_: Pair, stated: dict[str, float]) -> float | None:
    stem = pair_.solution.stem
    if stem in stated:
        return stated[stem]
    layout = _RUNS_LAYOUT.fullmatch(stem)
    return stated.get(layout[2]) if layout else None


def regrade(
    evaluator,
    solutions: Path,
    problems_root: Path,
    jobs: int | None = None,
    progress: Callable[[str], None] = print,
) -> list[dict]:
    """One row per solution: its verdict and reason, speedups measured, the claim beside them.
    `progress` gets a line as each build ends and as each timing starts and ends."""
    if not solutions.is_dir():
        raise ForgeBenchError(f"regrade: '{solutions}' is not a folder; give the folder of solution .py files.")
    if not problems_root.exists():
        raise ForgeBenchError(
            f"regrade: the problems '{problems_root}' do not exist; pass --problems with KernelBench's level folders."
        )
    pairs, unmatched = pair(solutions, problems_root)
    for line in unmatched:
        progress(f"skipped {line}")
    if not pairs:
        raise ForgeBenchError(f"regrade: no solution in {solutions} pairs with a problem under {problems_root}.")
    stated = claims(solutions)
    tasks: dict[Path, Task] = {p.problem: resolve_one(str(p.problem)) for p in pairs}
    sources = {p.solution: p.solution.read_text(errors="replace") for p in pairs}
    built = _build_all(evaluator, pairs, tasks, sources, jobs or os.cpu_count() or 1, progress)
    rows = []
    for number, (p, build) in enumerate(zip(pairs, built), 1):
        task = tasks[p.problem]
        if build is None:
            progress(f"timing {p.solution.name} ({number}/{len(pairs)})")
        result = build if build is not None else evaluator.evaluate(task, sources[p.solution])
        evaluator.release(task)
        rows.append(
            {
                "solution": p.solution.name,
                "problem": task.id,
                "verdict": result.verdict,
                "reason": result.reason,
                "speedup_vs_eager": result.speedup_vs_eager,
                "speedup_vs_compile": result.speedup_vs_compile,
                "claimed_speedup": _claim_for(p, stated),
                "time_ms": result.time_ms,
                "torch_ops": ", ".join(result.torch_ops[:4]),
            }
        )
        if build is None:
            progress(f"{p.solution.name} ({number}/{len(pairs)}): {_first_line(result.summary())}")
    return rows


def _build_all(
    evaluator, pairs: list[Pair], tasks: dict, sources: dict, workers: int, progress: Callable[[str], None]
) -> list:
    """Build every solution, `workers` at a time (they only compile and import): None for each that
    built, else its failed result. A line as each build ends, never two written into one."""
    progress(f"building {len(pairs)} solutions, {min(workers, len(pairs))} at a time; then timing them one at a time")
    lock, ended = threading.Lock(), itertools.count(1)

    def build(p: Pair):
        failed = evaluator.build(tasks[p.problem], sources[p.solution])
        outcome = "built" if failed is None else f"not built: {_first_line(failed.summary())}"
        with lock:
            progress(f"{p.solution.name} ({next(ended)}/{len(pairs)} builds): {outcome}")
        return failed

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(build, pairs))


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def render(rows: list[dict]) -> str:
    """The report's text: a count per verdict, then a table with a row per solution, where a figure
    a failed solution lacks is NO_FIGURE and a reason is its first line."""
    from tabulate import tabulate

    counts = Counter(row["verdict"] for row in rows)
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common())
    shown = [{**row, "reason": _first_line(row["reason"])} for row in rows]
    for row in shown:
        del row["time_ms"]
    table = tabulate(shown, headers="keys", tablefmt="pipe", floatfmt=".3g", missingval=NO_FIGURE)
    return f"{len(rows)} solutions regraded: {summary}\n\n{table}"


def _say(line: str) -> None:
    print(line, flush=True)  # as it happens, also into a pipe or a log


def main(args) -> int:
    """`forgebench regrade`: the report printed and written beside the run's folder."""
    from harness.config import compose, instantiate
    from harness.evaluate import Evaluator
    from harness.evaluate.settings import for_run

    overrides = ["evaluate.torch_ops=allow", *args.override]  # as KernelBench grades (an override wins)
    cfg = compose(platform=args.platform, overrides=overrides)
    folder = Path(cfg.run_root) / "regrade" / time.strftime("%Y%m%d-%H%M%S")
    evaluator = Evaluator(instantiate(cfg.platform, "platform"), for_run(cfg), folder / "work", Path(cfg.cache_dir))
    try:
        rows = regrade(evaluator, Path(args.solutions), Path(args.problems), args.jobs, progress=_say)
    finally:
        evaluator.close()
    report = render(rows)
    print(report)
    out = Path(args.report) if args.report else folder / "report.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n")
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0
