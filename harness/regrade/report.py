"""A regrade's rows: one per solution, kept in a journal as each is recorded (what a resumed regrade
skips), and the report written from them (report.md, and report.json with every reason whole)."""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path

from harness.evaluate.result import EvalResult
from harness.regrade.grade import first_line
from harness.regrade.layouts import Solution
from harness.regrade.record import claim_confirmed

# What a table cell shows where a failed solution has no figure (report.json holds null).
NO_FIGURE = "—"
# The table's columns; report.json's rows hold these, the solution's time_ms and content hash, and the
# seconds each phase of its evaluation took (evaluator phases: where a regrade's time goes).
SHOWN = ["solution", "model", "problem", "verdict", "reason", "speedup_vs_eager", "speedup_vs_compile"]
SHOWN += ["claimed_speedup", "claim", "torch_ops"]


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def row(solution: Solution, result: EvalResult, sha: str) -> dict:
    """The report's row for a graded solution: a figure it lacks is None, never NaN."""
    confirmed = claim_confirmed(result, solution.claimed_speedup)
    return {
        "solution": solution.key,
        "model": solution.model,
        "problem": solution.task.id,
        "verdict": result.verdict,
        "reason": result.reason,
        "speedup_vs_eager": _number(result.speedup_vs_eager),
        "speedup_vs_compile": _number(result.speedup_vs_compile),
        "sol_fraction": _number(result.sol_fraction),
        "claimed_speedup": solution.claimed_speedup,
        "claim": None if confirmed is None else ("confirmed" if confirmed else "refuted"),
        "time_ms": _number(result.time_ms),
        "torch_ops": ", ".join(result.torch_ops[:4]),
        "sha256": sha,
        "phases": {k: round(v, 4) for k, v in result.phases.items() if not math.isnan(v)},
    }


class Journal:
    """graded.jsonl in the regrade's folder: a row appended (and synced) as each solution is recorded.
    A solution is done when its latest row's content hash is the file's as it is now."""

    def __init__(self, path: Path):
        self.path = path
        lines = path.read_text().splitlines() if path.is_file() else []
        # A line torn by a kill mid-write is left out: its solution is graded again.
        self.rows = {r["solution"]: r for r in (_parse(line) for line in lines) if r is not None}

    def done(self, solution: Solution, sha: str) -> bool:
        return self.rows.get(solution.key, {}).get("sha256") == sha

    def add(self, entry: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(entry, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.rows[entry["solution"]] = entry


def _parse(line: str) -> dict | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) and "solution" in entry else None


def render(rows: list[dict]) -> str:
    """The report's text: a count per verdict and of claims, then a row per solution, where a figure a
    failed solution lacks is NO_FIGURE and a reason is its first line."""
    from tabulate import tabulate

    counts = Counter(r["verdict"] for r in rows)
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common())
    claims = Counter(r["claim"] for r in rows if r.get("claim"))
    if claims:
        summary += f"; claims: {claims['confirmed']} confirmed, {claims['refuted']} refuted"
    shown = [{k: first_line(r[k]) if k == "reason" else r.get(k) for k in SHOWN} for r in rows]
    table = tabulate(shown, headers="keys", tablefmt="pipe", floatfmt=".3g", missingval=NO_FIGURE)
    return f"{len(rows)} solutions regraded: {summary}\n\n{table}"


def write(rows: list[dict], out: Path) -> Path:
    """report.md (the text) and report.json beside it (every row whole, no NaN)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(rows) + "\n")
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1, allow_nan=False) + "\n")
    return out.with_suffix(".json")
