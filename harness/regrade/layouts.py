"""The folders `forgebench regrade` reads, as their systems publish them: each solution with its
problem, the model that wrote it (its `model.label`) and the speedup its authors claim.

- `runs`: KernelBench's runs layout, `level_L_problem_P_sample_S_kernel.py` beside `eval_results.json`
  (a claim where an entry has `ref_runtime`, or from KernelBench's `baseline_time_torch.json`), in the
  folder itself (one model) or in one subfolder per model; problems from --problems' level folders.
- `leaderboard`: the KernelBench leaderboard's layout, `data.json` mapping "Level L: P_Name" to entries
  {display_name, torch_speedup, file}, with `solutions/<file>.py` and `problems/l<L>_p<P>.py`.
- `named`: solutions named like their problems (`23_Softmax.py`), claims in `claims.json`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ForgeBenchError
from harness.tasks import Task, load_kernelbench_file

LAYOUTS = ("runs", "leaderboard", "named")
RUNS_FILE = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel")
PROBLEM_NAME = re.compile(r"Level (\d+): (\d+)_(\S.*)")
# How a solution's model is named: the folder holding it, the leaderboard entry's display_name, or
# one name given for every solution (name:LABEL).
LABEL_TYPES = ("folder", "display_name", "name:LABEL")


@dataclass(frozen=True)
class Solution:
    """One published solution, paired with its problem."""

    key: str  # the solution's file relative to the folder (and its model where two share a file)
    path: Path
    task: Task
    model: str
    claimed_speedup: float | None = None
    sample: int | None = None
    problem_set: str = ""  # the problems' folder as KernelBench names it: level1


@dataclass(frozen=True)
class PublishedSet:
    layout: str
    solutions: list[Solution]
    skipped: list[str]  # a sentence for each file that pairs with no problem

    @property
    def set_name(self) -> str:
        """The task set's name in the records: the problems' levels (`level1`), as a suite run over
        KernelBench's level folder names its set, so the two can share a table."""
        return ",".join(sorted({s.problem_set for s in self.solutions}))


def detect(folder: Path) -> str:
    """The layout a folder is in, or a sentence saying it is in none."""
    if (folder / "data.json").is_file():
        return "leaderboard"
    if any(RUNS_FILE.fullmatch(p.stem) for p in [*folder.glob("*.py"), *folder.glob("*/*.py")]):
        return "runs"
    if any(folder.glob("*.py")):
        return "named"
    raise ForgeBenchError(
        f"regrade: {folder} is in no layout regrade reads (no data.json, no level_L_problem_P_sample_S_kernel.py, "
        "no .py solutions); see docs/regrade.md."
    )


def label_rule(spec: str | None, layout: str) -> str | None:
    """The --label given, checked against the layout: None (the layout's own), folder, display_name
    or name:LABEL."""
    if spec is None or spec == "folder" or (spec.startswith("name:") and spec[5:].strip()):
        return spec
    if spec == "display_name":
        if layout != "leaderboard":
            raise ForgeBenchError(
                f"--label display_name: the {layout} layout has no display names; use --label folder or name:LABEL."
            )
        return spec
    raise ForgeBenchError(f"--label {spec}: not a label type; use one of {', '.join(LABEL_TYPES)}.")


def read(folder: Path, layout: str, problems_root: Path, label: str | None = None) -> PublishedSet:
    """The folder's solutions in the layout given (`auto`: detected)."""
    if not folder.is_dir():
        raise ForgeBenchError(f"regrade: '{folder}' is not a folder; give the folder of published solutions.")
    if layout == "auto":
        layout = detect(folder)
    if layout not in LAYOUTS:
        raise ForgeBenchError(f"--layout {layout}: not a layout regrade reads; use auto, {', '.join(LAYOUTS)}.")
    rule = label_rule(label, layout)
    if layout == "leaderboard":
        solutions, skipped = _leaderboard(folder, rule), []
    else:
        if not problems_root.exists():
            raise ForgeBenchError(
                f"regrade: the problems '{problems_root}' do not exist; pass --problems with KernelBench's levels."
            )
        solutions, skipped = _runs_or_named(folder, problems_root, rule)
    if not solutions:
        raise ForgeBenchError(f"regrade: no solution in {folder} ({layout} layout) pairs with a problem.")
    return PublishedSet(layout, solutions, skipped)


def _model(rule: str | None, holder: Path, display_name: str | None = None) -> str:
    if rule and rule.startswith("name:"):
        return rule[5:].strip()
    if display_name is not None and rule != "folder":
        return display_name
    return holder.resolve().name


def _task(problem: Path, task_id: str | None = None) -> Task:
    task = load_kernelbench_file(problem)
    return dataclasses.replace(task, id=task_id) if task_id else task


# --- KernelBench's leaderboard ------------------------------------------------------------------


def _leaderboard(folder: Path, rule: str | None) -> list[Solution]:
    try:
        data = json.loads((folder / "data.json").read_text())
    except (OSError, ValueError) as exc:
        raise ForgeBenchError(f"regrade: {folder / 'data.json'} is not JSON ({exc}).") from exc
    if not isinstance(data, dict):
        raise ForgeBenchError(f"regrade: {folder / 'data.json'} must map problem names to lists of entries.")
    solutions = []
    for name, entries in data.items():
        found = PROBLEM_NAME.fullmatch(name.strip())
        if not found or not isinstance(entries, list):
            raise ForgeBenchError(
                f"regrade: data.json's '{name}' is not a problem name like 'Level 1: 23_Softmax' with a list."
            )
        level, number, title = found.groups()
        problem = folder / "problems" / f"l{level}_p{number}.py"
        if not problem.is_file():
            raise ForgeBenchError(f"regrade: data.json's '{name}' has no problem file {problem}; add it or drop it.")
        task = _task(problem, f"{number}_{title.strip()}")
        solutions += [_entry(folder, name, entry, task, rule, level) for entry in entries]
    shared = {s.key for s in solutions if sum(o.key == s.key for o in solutions) > 1}
    return [dataclasses.replace(s, key=f"{s.key}#{s.model}") if s.key in shared else s for s in solutions]


def _entry(folder: Path, name: str, entry, task: Task, rule: str | None, level: str) -> Solution:
    if not isinstance(entry, dict) or not entry.get("file") or not entry.get("display_name"):
        raise ForgeBenchError(f"regrade: an entry of data.json's '{name}' lacks its file or display_name: {entry}.")
    stem = str(entry["file"]).removesuffix(".py")
    path = folder / "solutions" / f"{stem}.py"
    if not path.is_file():
        raise ForgeBenchError(
            f"regrade: data.json's '{name}' entry by {entry['display_name']} names {path}, which does not exist."
        )
    model = _model(rule, folder, str(entry["display_name"]))
    claim = entry.get("torch_speedup")
    claimed = float(claim) if isinstance(claim, (int, float)) and claim > 0 else None
    return Solution(str(path.relative_to(folder)), path, task, model, claimed, None, f"level{level}")


# --- KernelBench's runs, and files named like their problems --------------------------------------


def _runs_or_named(folder: Path, problems_root: Path, rule: str | None) -> tuple[list[Solution], list[str]]:
    """Solutions in the folder (one model) or in its subfolders (one model each)."""
    holders = [folder] if any(folder.glob("*.py")) else sorted(p for p in folder.iterdir() if p.is_dir())
    problems = {p.stem: p for p in sorted(problems_root.rglob("*.py"))}
    by_number = {(p.parent.name.removeprefix("level"), stem.split("_", 1)[0]): p for stem, p in problems.items()}
    solutions, skipped = [], []
    for holder in holders:
        model, stated = _model(rule, holder), _claims(holder)
        for path in sorted(holder.glob("*.py")):
            problem, sample = _problem_of(path.stem, problems, by_number)
            if problem is None:
                skipped.append(f"{path.relative_to(folder)}: no problem under {problems_root} has its name")
                continue
            runs = RUNS_FILE.fullmatch(path.stem)
            claim = stated.get(path.stem) or (stated.get(f"{runs[1]}/{runs[2]}/{runs[3]}") if runs else None)
            key = str(path.relative_to(folder))
            solutions.append(Solution(key, path, _task(problem), model, claim, sample, problem.parent.name))
    return solutions, skipped


def _problem_of(stem: str, problems: dict[str, Path], by_number: dict) -> tuple[Path | None, int | None]:
    runs = RUNS_FILE.fullmatch(stem)
    if runs:
        return by_number.get((runs[1], runs[2])), int(runs[3])
    if stem in problems:
        return problems[stem], None
    number = stem.split("_", 1)[0]
    matches = [p for s, p in problems.items() if s.split("_", 1)[0] == number and s in stem]
    return (matches[0] if len(matches) == 1 else None), None


def _claims(holder: Path) -> dict[str, float]:
    """The speedups a folder claims: by solution stem (`claims.json`), or by "level/problem/sample"
    from KernelBench's eval_results.json (an entry's ref_runtime over its runtime, or the run's
    baseline_time_torch.json mean over it); a sample its authors found incorrect claims nothing."""
    stated: dict[str, float] = {}
    claims = _json(holder / "claims.json")
    if isinstance(claims, dict):
        stated |= {str(k): float(v) for k, v in claims.items() if isinstance(v, (int, float)) and v > 0}
    baselines = _json(holder / "baseline_time_torch.json") or {}
    results = _json(holder / "eval_results.json")
    for problem, entries in results.items() if isinstance(results, dict) else []:
        for sample, entry in _samples(entries):
            level = str(entry.get("level") or _only_level(holder))
            ref = entry.get("ref_runtime") or _baseline(baselines, level, problem)
            runtime = entry.get("runtime")
            if entry.get("correctness") is False or not _positive(runtime) or not _positive(ref):
                continue
            stated[f"{level}/{problem}/{sample}"] = float(ref) / float(runtime)
    return stated


def _samples(entries) -> list[tuple[int, dict]]:
    """KernelBench's eval_results.json per problem: a list of samples, or one sample (older runs)."""
    listed = entries if isinstance(entries, list) else [entries]
    return [(int(e.get("sample_id", 0)), e) for e in listed if isinstance(e, dict)]


def _only_level(holder: Path) -> str:
    levels = {m[1] for p in holder.glob("*.py") if (m := RUNS_FILE.fullmatch(p.stem))}
    return levels.pop() if len(levels) == 1 else "?"


def _baseline(baselines: dict, level: str, problem: str) -> float | None:
    """KernelBench's baseline_time_torch.json: {"level1": {"23_Softmax.py": {"mean": ms}}}."""
    for name, stats in (baselines.get(f"level{level}") or {}).items():
        if str(name).split("_", 1)[0] == str(problem) and isinstance(stats, dict):
            return stats.get("mean")
    return None


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and value > 0


def _json(path: Path):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise ForgeBenchError(f"regrade: {path} is not JSON ({exc}); fix or remove it.") from exc
