"""`forgebench compare`: suite runs side by side on the tasks both attempted, won, lost or tied
within the timing spread, with the paired geomean of what B delivers over A task by task, read as
each task's verdict was decided (so the headline agrees with the wins)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from harness.errors import ForgeBenchError
from leaderboard import stats
from leaderboard.table import render, resolve_run, summarize

# Without a recorded spread, times this close are the same time (timing noise is a few percent).
RELATIVE_TIE = 0.05
RULES = {
    "spread": "the two runs' [time_p20_ms, time_p80_ms] overlap",
    "within 5%": "time_ms differs by under 5% (no spread recorded)",
    "both incorrect": "neither run has a correct kernel",
    "correctness": "a correct kernel beats an incorrect one",
}
# A recaptured task has a new task_hash: it is never paired with the old one.
PAIR_KEYS = ["task", "task_hash"]
SIDE = ["correct", "speedup_vs_eager", "time_ms", "time_p20_ms", "time_p80_ms", "cost_usd"]
TASK_VIEW = ["task", "correct_a", "correct_b", "time_ms_a", "time_ms_b", "speedup_vs_eager_a", "speedup_vs_eager_b"]
TASK_VIEW += ["verdict", "rule"]


@dataclass(frozen=True)
class Comparison:
    """Run B against run A on the tasks both attempted."""

    task_set: str
    a: dict[str, str]
    b: dict[str, str]
    pairs: pd.DataFrame
    geomean_ratio: float
    ci95_low: float
    ci95_high: float
    cost_ratio: float | None
    attempted_only: dict[str, list[str]]

    def solved_only_by(self, side: str) -> list[str]:
        other = "b" if side == "a" else "a"
        solved = (self.pairs[f"correct_{side}"] > 0) & ~(self.pairs[f"correct_{other}"] > 0)
        return list(self.pairs.loc[solved, "task"])

    def count(self, verdict: str) -> int:
        return int((self.pairs["verdict"] == verdict).sum())

    def tie_rules(self) -> dict[str, int]:
        return self.pairs.loc[self.pairs["verdict"] == "tie", "rule"].value_counts().to_dict()

    def to_dict(self) -> dict:
        return {
            "task_set": self.task_set,
            "a": self.a,
            "b": self.b,
            "paired_tasks": len(self.pairs),
            "wins": self.count("win"),
            "losses": self.count("loss"),
            "ties": self.count("tie"),
            "tie_rules": self.tie_rules(),
            "geomean_ratio": self.geomean_ratio,
            "ci95_low": self.ci95_low,
            "ci95_high": self.ci95_high,
            "cost_ratio": self.cost_ratio,
            "solved_only_by_a": self.solved_only_by("a"),
            "solved_only_by_b": self.solved_only_by("b"),
            "attempted_only_by_a": self.attempted_only["a"],
            "attempted_only_by_b": self.attempted_only["b"],
            "tasks": json.loads(self.pairs[TASK_VIEW].to_json(orient="records")),
        }


def _verdict(pair) -> tuple[str, str]:
    """B against A on one task: (win, loss or tie; the rule of RULES that decided it)."""
    a_correct, b_correct = pair.correct_a > 0, pair.correct_b > 0
    if a_correct != b_correct:
        return ("win" if b_correct else "loss"), "correctness"
    if not a_correct:
        return "tie", "both incorrect"
    spread = (pair.time_p20_ms_a, pair.time_p80_ms_a, pair.time_p20_ms_b, pair.time_p80_ms_b)
    if pd.notna(list(spread)).all():
        rule, tied = "spread", pair.time_p20_ms_a <= pair.time_p80_ms_b and pair.time_p20_ms_b <= pair.time_p80_ms_a
    else:
        rule, tied = "within 5%", abs(pair.time_ms_b / pair.time_ms_a - 1) < RELATIVE_TIE
    if tied:
        return "tie", rule
    return ("win" if pair.time_ms_b < pair.time_ms_a else "loss"), rule


def _gain(pair) -> float:
    """What B delivers over A on one task, read as its verdict was decided, so the headline agrees with
    the wins: 1 for a tie; the kernels' own times where both are correct (each run's eager was timed at
    another moment, and a ratio of speedups would carry the machine's drift between them); the guarded
    speedups where one is correct (the guard delivers eager for the other)."""
    if pair.verdict == "tie":
        return 1.0
    if pair.rule != "correctness":
        return float(pair.time_ms_a / pair.time_ms_b)
    a, b = (
        stats.guarded([s], [c > 0])[0]
        for s, c in ((pair.speedup_vs_eager_a, pair.correct_a), (pair.speedup_vs_eager_b, pair.correct_b))
    )
    return float(b / a)


def _about(tasks: pd.DataFrame, run_id: str) -> dict[str, str]:
    first = tasks[tasks["parent_run_id"] == run_id].iloc[0]
    return {"run": run_id[:8], "run_id": run_id, **{k: first[k] for k in ("agent", "model", "device", "task_set")}}


def compare_runs(
    tasks: pd.DataFrame, a_id: str, b_id: str, resamples: int = stats.RESAMPLES, seed: int = stats.SEED
) -> Comparison:
    """Run B against run A, paired by task and task_hash."""
    sides = []
    for run_id in (a_id, b_id):
        rows = tasks[tasks["parent_run_id"] == run_id]
        sides.append(rows.assign(task_hash=rows["task_hash"].fillna(""))[[*PAIR_KEYS, *SIDE]])
    merged = sides[0].merge(sides[1], on=PAIR_KEYS, how="outer", suffixes=("_a", "_b"), indicator=True)
    pairs = merged[merged["_merge"] == "both"].drop(columns="_merge").sort_values("task").reset_index(drop=True)
    if pairs.empty:
        raise ForgeBenchError(
            f"runs {a_id[:8]} and {b_id[:8]} share no task (same task id and task_hash); compare runs of one task set."
        )
    pairs[["verdict", "rule"]] = [_verdict(pair) for pair in pairs.itertuples()]
    ratio, low, high = stats.paired_ratio([1.0] * len(pairs), [_gain(p) for p in pairs.itertuples()], resamples, seed)
    cost_a, cost_b = (float(pairs[f"cost_usd_{s}"].fillna(0).sum()) for s in "ab")
    alone = {"a": "left_only", "b": "right_only"}
    only = {side: sorted(merged.loc[merged["_merge"] == which, "task"]) for side, which in alone.items()}
    a, b = _about(tasks, a_id), _about(tasks, b_id)
    return Comparison(a["task_set"], a, b, pairs, ratio, low, high, cost_b / cost_a if cost_a > 0 else None, only)


def pick_runs(tasks: pd.DataFrame, prefixes: list[str], any_set: bool = False) -> list[str]:
    """The suite runs named (ids or unique prefixes), all of one task set unless `any_set`."""
    if len(prefixes) < 2:
        raise ForgeBenchError("compare needs two suite runs or more (RUN RUN ...), or --by model or --by agent.")
    runs = [resolve_run(tasks, prefix) for prefix in prefixes]
    task_set = {run: tasks.loc[tasks["parent_run_id"] == run, "task_set"].iloc[0] for run in runs}
    for run in runs[1:]:
        if task_set[run] != task_set[runs[0]] and not any_set:
            raise ForgeBenchError(
                f"run {run[:8]} is of task set '{task_set[run]}' and run {runs[0][:8]} of '{task_set[runs[0]]}', "
                "so their tasks differ; pass --any-set to compare them on the tasks they share."
            )
    return runs


def latest_per_group(tasks: pd.DataFrame, by: str) -> list[list[str]]:
    """Per task set, the latest suite run of each `by` (model label or agent), the set's leader first."""
    ranked = summarize(tasks)
    ranked["start_ms"] = ranked["parent_run_id"].map(tasks.groupby("parent_run_id")["started"].min())
    groups = []
    for _, runs in ranked.groupby("task_set", sort=True):
        latest = runs.sort_values("start_ms").groupby(by).tail(1).sort_index()
        if len(latest) > 1:
            groups.append(list(latest["parent_run_id"]))
    if not groups:
        raise ForgeBenchError(f"--by {by}: no task set has runs of two {by}s or more; name the runs instead.")
    return groups


def _label(run: dict[str, str]) -> str:
    return f"{run['agent']} · {run['model']} (run {run['run']}, {run['device']})"


def _describe(comparison: Comparison) -> str:
    c = comparison
    ties = ", ".join(f"{n} {rule}" for rule, n in c.tie_rules().items())
    cost = f"{c.cost_ratio:.3g}" if c.cost_ratio is not None else "n/a (A cost nothing)"
    lines = [
        f"### B {_label(c.b)} against A {_label(c.a)}, task set {c.task_set}",
        "",
        f"- {len(c.pairs)} tasks paired: B wins {c.count('win')}, loses {c.count('loss')}, "
        f"ties {c.count('tie')}" + (f" ({ties})" if ties else ""),
        f"- geomean of B's gain over A per task (1 where tied): {c.geomean_ratio:.3g} "
        f"(95% bootstrap interval over tasks: {c.ci95_low:.3g} to {c.ci95_high:.3g})",
        f"- cost ratio, B/A (cost_usd over the paired tasks): {cost}",
        f"- solved only by B: {', '.join(c.solved_only_by('b')) or 'none'}; "
        f"only by A: {', '.join(c.solved_only_by('a')) or 'none'}",
    ]
    for side in ("a", "b"):
        if c.attempted_only[side]:
            lines.append(f"- attempted only by {side.upper()}, left out: {', '.join(c.attempted_only[side])}")
    if c.a["device"] != c.b["device"]:
        lines.append(f"- note: the runs' devices differ ({c.a['device']}, {c.b['device']}); times are compared as is")
    return "\n".join([*lines, "", render(c.pairs, TASK_VIEW)])


def markdown(comparisons: list[Comparison], selection: str) -> str:
    rules = "; ".join(f"{rule}: {meaning}" for rule, meaning in RULES.items())
    return "\n\n".join([f"{selection}. Rules: {rules}.", *(_describe(c) for c in comparisons)])


def as_json(comparisons: list[Comparison], selection: str) -> str:
    return json.dumps({"selection": selection, "rules": RULES, "comparisons": [c.to_dict() for c in comparisons]})


FORMATS = {"md": markdown, "json": as_json}
