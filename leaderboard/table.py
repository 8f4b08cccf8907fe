"""Child runs of ForgeBench suite runs, summarised one row per suite run."""

from __future__ import annotations

import math

import pandas as pd

# Which columns the leaderboard shows, in order (presentation is declared apart from execution).
COLUMNS = [
    "agent",
    "model",
    "platform",
    "suite",
    "tasks",
    "correct",
    "geomean_speedup",
    "geomean_correct",
    "geomean_vs_compile",
    "fast_1",
    "cost_usd",
    "llm_calls",
    "started",
]
TASK_COLUMNS = [
    "task",
    "correct",
    "speedup_vs_eager",
    "speedup_vs_compile",
    "time_ms",
    "eager_ms",
    "compile_ms",
    "rounds",
    "llm_calls",
    "cost_usd",
    "stop_reason",
]


OPTIONAL_COLUMNS = ["speedup_vs_compile", "compile_ms", "geomean_vs_compile"]


def task_runs(tracking_uri: str, experiment: str, parent_run_id: str | None = None) -> pd.DataFrame:
    """One row per task run, with its suite run's tags."""
    from harness.record import mlflow_client

    client = mlflow_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return pd.DataFrame(columns=["parent_run_id", *TASK_COLUMNS])
    query = "tags.`forgebench.kind` = 'task'"
    if parent_run_id:
        query += f" and tags.`mlflow.parentRunId` = '{parent_run_id}'"
    rows = []
    for run in client.search_runs([found.experiment_id], query, max_results=50000):
        tags, metrics = run.data.tags, run.data.metrics
        rows.append(
            {
                "parent_run_id": tags.get("mlflow.parentRunId"),
                "started": run.info.start_time,
                **{k: tags.get(k) for k in ("task", "agent", "model", "platform", "suite", "stop_reason")},
                **metrics,
            }
        )
    frame = pd.DataFrame(rows)
    for column in ("speedup_vs_eager", "speedup_vs_compile", "cost_usd", "llm_calls", "correct"):
        if column not in frame:
            frame[column] = math.nan
    return frame


def _geomean(values: pd.Series) -> float:
    values = values.dropna()
    return float(math.exp(values.map(math.log).mean())) if len(values) else math.nan


def summarize(tasks: pd.DataFrame) -> pd.DataFrame:
    """One row per suite run. geomean_speedup counts a task without a correct kernel, or with a
    slower one, as 1.0 (the guard falls back to PyTorch); geomean_correct is over correct tasks only."""
    if tasks.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for parent, group in tasks.groupby("parent_run_id", sort=False):
        correct = group["correct"].fillna(0) > 0
        speedup = group["speedup_vs_eager"].where(correct)
        first = group.iloc[0]
        rows.append(
            {
                "agent": first["agent"],
                "model": first["model"],
                "platform": first["platform"],
                "suite": first["suite"],
                "tasks": len(group),
                "correct": int(correct.sum()),
                "geomean_speedup": _geomean(speedup.fillna(1.0).clip(lower=1.0)),
                "geomean_correct": _geomean(speedup),
                "geomean_vs_compile": _geomean(group["speedup_vs_compile"].where(correct)),
                "fast_1": float((speedup > 1.0).sum()) / len(group),
                "cost_usd": float(group["cost_usd"].fillna(0).sum()),
                "llm_calls": int(group["llm_calls"].fillna(0).sum()),
                "started": pd.to_datetime(group["started"].min(), unit="ms").strftime("%Y-%m-%d %H:%M"),
                "parent_run_id": parent,
            }
        )
    return pd.DataFrame(rows).sort_values(["geomean_speedup", "correct"], ascending=False).reset_index(drop=True)


def render(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    from tabulate import tabulate

    shown = frame[[c for c in (columns or COLUMNS) if c in frame]]
    # Columns of a baseline or measure the runs may not have taken (compile on a run without it).
    optional = [c for c in OPTIONAL_COLUMNS if c in shown and shown[c].isna().all()]
    shown = shown.drop(columns=optional)
    return tabulate(shown, headers="keys", tablefmt="github", showindex=False, floatfmt=".3g")
