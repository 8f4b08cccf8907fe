"""Child runs of ForgeBench suite runs, summarised one row per suite run and ranked within a task set."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import ForgeBenchError
from leaderboard import predicted, stats

FAST_P = (0, 1, 1.5, 2)

# "{baseline}" in a column list stands for one column per baseline the records hold (`baselines`),
# by name, less any the list names on its own (the best baseline's): a baseline added as one file
# (harness/evaluate/baselines/) is shown with no edit here.
BASELINE = "{baseline}"
# "{source}" likewise stands for one column per model the records' captured tasks came from.
SOURCE = "{source}"

# Which columns the leaderboard shows, in order (presentation is declared apart from execution).
COLUMNS = [
    "agent",
    "model",
    "platform",
    "solved",
    "claims_confirmed",
    "claims_refuted",
    *(f"fast_{p:g}" for p in FAST_P),
    "geomean_correct",
    "geomean_speedup",
    "ci95_low",
    "ci95_high",
    "geomean_vs_{baseline}",
    "geomean_vs_best",
    predicted.COLUMN,
    "cost_usd",
    "cost_per_task",
    "tokens",
    "llm_calls",
    "wall_s",
    "device",
    "torch_ops",
    "started",
    "run",
]
# Everything summarize() gives a suite run; json and csv carry all of it, under the names of
# docs/records.md.
SUMMARY_FIELDS = [
    "task_set",
    "suite",
    *COLUMNS[:3],
    "model_string",
    "tasks",
    "correct",
    *COLUMNS[3:-1],
    "tokens_in",
    "tokens_out",
    "run",
    "parent_run_id",
]
TASK_COLUMNS = [
    "task",
    "correct",
    "verdict",
    "speedup_vs_eager",
    "claimed_speedup",
    "speedup_vs_{baseline}",
    "speedup_vs_best",
    "best_baseline",
    "time_ms",
    "eager_ms",
    "{baseline}_ms",
    "rounds",
    "llm_calls",
    "cost_usd",
    "stop_reason",
    "torch_ops_used",
]
# Across runs a task's row has to say whose it is.
PER_TASK_COLUMNS = ["run", "agent", "model", *TASK_COLUMNS]

# Shown only where some run has them (as a baseline's columns are, where it was timed): the best
# baseline where a run recorded it (runs before it did not), the torch_ops rule where a run was
# judged by one (runs recorded before it), the PyTorch ops a kernel kept where a rule allowed them.
OPTIONAL_COLUMNS = ["speedup_vs_best", "best_baseline", "geomean_vs_best", "torch_ops", "torch_ops_used"]
# Regraded sets (forgebench regrade): each solution's verdict, the speedup its authors claimed, and
# how many claims the measurement confirmed or refuted.
OPTIONAL_COLUMNS += ["verdict", "claimed_speedup", "claims_confirmed", "claims_refuted"]
# e2e records: an LLM's prefill and decode apart, and a workload changed from the captured one.
OPTIONAL_COLUMNS += ["e2e_prefill_speedup_vs_eager", "e2e_decode_speedup_vs_eager", "overrides"]
# ... and each execution mode's realization of the predicted gain, or why the mode was refused.
OPTIONAL_COLUMNS += ["realization", "refused"]

TAGS = ("task", "task_hash", "agent", "platform", "suite", "stop_reason", "device", "torch_ops", "torch_ops_used")
TAGS += ("best_baseline", "verdict", "source", "operator", "members")
METRICS = ("correct", "speedup_vs_eager", "time_ms", "time_p20_ms", "time_p80_ms", "speedup_vs_best")
METRICS += ("cost_usd", "tokens_in", "tokens_out", "llm_calls", "wall_s")
BASE = (
    "run_id", "parent_run_id", "started", *TAGS, "model", "model_string", "task_set", "task_count", "suite_status",
    *METRICS,
)  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """What a table shows (md, html) and what it exports (json, csv), and how its heading names the
    table and counts the runs in it: "<table_name> <name> (<n> <run_noun>s)", n the distinct values
    of run_key among its rows."""

    shown: list[str]
    exported: list[str]
    table_name: str = "task set"
    run_key: str = "parent_run_id"
    run_noun: str = "suite run"


RUN_LAYOUT = Layout(COLUMNS, SUMMARY_FIELDS)
TASK_LAYOUT = Layout(PER_TASK_COLUMNS, ["task_set", *PER_TASK_COLUMNS, "task_hash", "parent_run_id"])
# `--predicted`: a row per suite run, captured model and execution mode (leaderboard/predicted.py).
PREDICTED_LAYOUT = Layout(
    predicted.VIEW_COLUMNS,
    ["task_set", *predicted.VIEW_COLUMNS, "parent_run_id"],
    table_name="predicted end to end, task set",
)


def _search(client, experiment_id: str, query: str) -> Iterator:
    token = None
    while True:
        page = client.search_runs([experiment_id], query, max_results=50000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def task_runs(tracking_uri: str, experiment: str, parent_run_id: str | None = None) -> pd.DataFrame:
    """One row per task run, with its suite run's tags. `model` is the label (tag `model.label`, else
    the model string, kept as `model_string`); `task_set` is the suite's name for runs recorded before
    that tag; `task_count` is how many tasks the suite run selected (NaN where its run does not say)."""
    from harness.record import PARENT_KINDS, mlflow_client

    client = mlflow_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return pd.DataFrame(columns=BASE)
    only = f" and attributes.run_id = '{parent_run_id}'" if parent_run_id else ""
    tasks = "tags.`forgebench.kind` = 'task'"
    if parent_run_id:
        tasks += f" and tags.`mlflow.parentRunId` = '{parent_run_id}'"
    parents = {
        run.info.run_id: run
        for kind in PARENT_KINDS  # a store's search takes no OR: one search per kind
        for run in _search(client, found.experiment_id, f"tags.`forgebench.kind` = '{kind}'{only}")
    }
    counts = {run_id: run.data.tags.get("task_count") for run_id, run in parents.items()}
    rows = []
    for run in _search(client, found.experiment_id, tasks):
        tags = run.data.tags
        parent = tags.get("mlflow.parentRunId")
        rows.append(
            {
                **run.data.metrics,
                "run_id": run.info.run_id,
                "parent_run_id": parent,
                "started": run.info.start_time,
                **{k: tags.get(k) for k in TAGS},
                "model": tags.get("model.label") or tags.get("model"),
                "model_string": tags.get("model"),
                "task_set": tags.get("task_set") or tags.get("suite"),
                "task_count": float(counts.get(parent) or math.nan),
                # RUNNING once it has ended means it was killed: the run is unfinished until resumed.
                "suite_status": parents[parent].info.status if parent in parents else None,
            }
        )
    if not rows:
        return pd.DataFrame(columns=BASE)
    frame = pd.DataFrame(rows)
    return frame.reindex(columns=[*BASE, *(c for c in frame if c not in BASE)])


def resolve_run(tasks: pd.DataFrame, prefix: str) -> str:
    """The suite run whose id starts with `prefix` (6 characters or more, and only one run's)."""
    from harness.record import match_run_id

    return match_run_id(tasks["parent_run_id"].dropna(), prefix)


def _since_ms(since: str) -> int:
    try:
        moment = pd.Timestamp(since)
    except (ValueError, OverflowError):
        moment = pd.NaT
    if moment is pd.NaT:
        raise ForgeBenchError(f"--since '{since}' is not a date; give one like 2026-11-30 or 2026-11-30T14:00.")
    # MLflow's start times are UTC; a date without a zone is read as UTC too, as `started` shows it.
    moment = moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")
    return moment.value // 1_000_000


def select_runs(
    tasks: pd.DataFrame,
    run: str | None = None,
    suite: str | None = None,
    model: str | None = None,
    agent: str | None = None,
    platform: str | None = None,
    since: str | None = None,
) -> pd.DataFrame:
    """The task runs of the suite runs that pass every filter given. `suite` matches the suite or the
    task set, `model` the label or the model string, `since` the suite run's start; a filter that
    leaves nothing is an error naming what it could have matched."""
    if run:
        tasks = tasks[tasks["parent_run_id"] == resolve_run(tasks, run)]
    filters = {"suite": (suite, ["suite", "task_set"]), "model": (model, ["model", "model_string"])}
    filters |= {"agent": (agent, ["agent"]), "platform": (platform, ["platform"])}
    for flag, (wanted, columns) in filters.items():
        if wanted is None:
            continue
        kept = tasks[tasks[columns].eq(wanted).any(axis=1)]
        if kept.empty:
            present = ", ".join(sorted(set(tasks[columns[0]].dropna())))
            raise ForgeBenchError(f"--{flag} '{wanted}' matches no suite run; the runs selected have {present}.")
        tasks = kept
    if since is not None:
        started = tasks.groupby("parent_run_id")["started"].transform("min")
        kept = tasks[started >= _since_ms(since)]
        if kept.empty:
            latest = pd.to_datetime(started.max(), unit="ms").strftime("%Y-%m-%d %H:%M")
            raise ForgeBenchError(f"--since '{since}' leaves no suite run; the latest selected started {latest} UTC.")
        tasks = kept
    return tasks


def _summary(group: pd.DataFrame, compared: list[str], resamples: int, seed: int) -> dict:
    first = group.iloc[0]
    # Tasks the run selected but never recorded (killed, or broken) count as failed, so a run that
    # stopped early is not ranked on the tasks it happened to finish.
    tasks = max(len(group), int(first["task_count"]) if pd.notna(first["task_count"]) else 0)
    unrecorded = tasks - len(group)
    recorded = group["correct"].fillna(0).to_numpy() > 0
    correct = np.concatenate([recorded, np.zeros(unrecorded, dtype=bool)])
    speedup = np.concatenate([group["speedup_vs_eager"].to_numpy(float), np.full(unrecorded, math.nan)])
    delivered = stats.guarded(speedup, correct)
    low, high = stats.bootstrap_geomean(delivered, resamples, seed)
    # A regraded set states no cost: unknown, not free.
    cost = float(group["cost_usd"].fillna(0).sum()) if group["cost_usd"].notna().any() else math.nan
    tokens_in, tokens_out = (int(group[k].fillna(0).sum()) for k in ("tokens_in", "tokens_out"))
    return {
        **{k: first[k] for k in ("task_set", "suite", "agent", "model", "model_string", "platform", "device")},
        "torch_ops": first["torch_ops"],
        "tasks": tasks,
        "correct": int(correct.sum()),
        # A suite run still RUNNING has not ended: killed (resume it with the same command) or in progress.
        "solved": f"{int(correct.sum())}/{tasks}" + (" unfinished" if first["suite_status"] == "RUNNING" else ""),
        **_claims(group),
        **{f"fast_{p:g}": stats.fast_p(speedup, correct, p) for p in FAST_P},
        "geomean_correct": stats.geomean(speedup[correct]),
        "geomean_speedup": stats.geomean(delivered),
        "ci95_low": low,
        "ci95_high": high,
        # Over each baseline, and over the best one each task had (where recorded): how far past it.
        **{f"geomean_vs_{b}": stats.geomean(group[f"speedup_vs_{b}"].to_numpy(float)[recorded]) for b in compared},
        # What the kernels would do to each model the tasks were captured from (leaderboard/predicted.py).
        **predicted.columns(group),
        "cost_usd": cost,
        "cost_per_task": cost / tasks,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "tokens": tokens_in + tokens_out,
        "llm_calls": int(group["llm_calls"].fillna(0).sum()),
        "wall_s": float(group["wall_s"].fillna(0).sum()),
        "started": pd.to_datetime(group["started"].min(), unit="ms").strftime("%Y-%m-%d %H:%M"),
        "run": first["parent_run_id"][:8],
        "parent_run_id": first["parent_run_id"],
    }


def _claims(group: pd.DataFrame) -> dict[str, float]:
    """How many speedups a regraded set claimed the measurement confirmed and refuted (each task run's
    claim_confirmed, 1 or 0, as `forgebench regrade` judged it); NaN for runs that claimed nothing."""
    judged = group["claim_confirmed"].dropna() if "claim_confirmed" in group else pd.Series(dtype=float)
    if judged.empty:
        return {"claims_confirmed": math.nan, "claims_refuted": math.nan}
    return {"claims_confirmed": int((judged > 0).sum()), "claims_refuted": int((judged <= 0).sum())}


def summarize(tasks: pd.DataFrame, resamples: int = stats.RESAMPLES, seed: int = stats.SEED) -> pd.DataFrame:
    """One row per suite run, ranked within its task set by the guarded geomean, then tasks solved,
    then cost. geomean_speedup counts a task without a correct kernel, or with a slower one, as 1.0
    (the guard falls back to PyTorch); geomean_correct is over correct tasks only, NaN without one;
    ci95_low/high bound geomean_speedup by resampling the run's tasks."""
    compared = baselines(tasks)
    fields = expand(SUMMARY_FIELDS, compared, predicted.sources(tasks))
    if tasks.empty:
        return pd.DataFrame(columns=fields)
    rows = [_summary(group, compared, resamples, seed) for _, group in tasks.groupby("parent_run_id", sort=False)]
    order = ["task_set", "geomean_speedup", "correct", "cost_usd"]
    ranked = pd.DataFrame(rows, columns=fields).sort_values(order, ascending=[True, False, False, True])
    return ranked.reset_index(drop=True)


def per_task(tasks: pd.DataFrame) -> pd.DataFrame:
    """The task runs with their suite run's short id, ordered by task set, task and run."""
    rows = tasks.assign(run=tasks["parent_run_id"].str[:8])
    return rows.sort_values(["task_set", "task", "run"]).reset_index(drop=True)


def by_task_set(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The frame cut into one table per task set (runs are ranked only against the same tasks)."""
    return [(name, rows.reset_index(drop=True)) for name, rows in frame.groupby("task_set", sort=True, dropna=False)]


_COMPARED = re.compile(r"(?:speedup|geomean)_vs_(?P<name>\w+)")
_PREDICTED = re.compile(predicted.COLUMN.format(source="(?P<name>.+)"))


def baselines(frame: pd.DataFrame) -> list[str]:
    """What the frame's records compare the kernels with beside eager, by name: each baseline a task
    run holds a `speedup_vs_<name>` for (docs/records.md), or a suite run's summary a `geomean_vs_<name>`,
    and `best`, each task's fastest of them."""
    return sorted({m["name"] for c in frame.columns if (m := _COMPARED.fullmatch(str(c)))} - {"eager"})


def captured_models(frame: pd.DataFrame) -> list[str]:
    """The models a suite run summary predicts end to end (its `predicted_e2e_<source>` columns)."""
    return sorted({m["name"] for c in frame.columns if (m := _PREDICTED.fullmatch(str(c)))})


def expand(columns: list[str], names: list[str], models: list[str] = ()) -> list[str]:
    """The columns with each "{baseline}" entry spelled out for every baseline name and each
    "{source}" entry for every captured model, less the columns the list names on their own."""
    own = {c for c in columns if BASELINE not in c and SOURCE not in c}
    values = {BASELINE: ("baseline", names), SOURCE: ("source", models)}

    def spelled(column: str) -> list[str]:
        for mark, (key, found) in values.items():
            if mark in column:
                return [name for name in (column.format(**{key: v}) for v in found) if name not in own]
        return [column]

    return [name for c in columns for name in spelled(c)]


def columns_for(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    """Those of the columns, with a column per baseline and per captured model spelled out, that the frame has."""
    return [c for c in expand(columns, baselines(frame), captured_models(frame)) if c in frame]


def shown(frame: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """The columns the frame has, less those of a baseline the runs did not time (compile on a run
    without it) and the optional ones no run has."""
    columns = columns or COLUMNS
    kept = frame[columns_for(frame, columns)]
    optional = [c for c in kept if c in OPTIONAL_COLUMNS or c not in columns]
    return kept.drop(columns=[c for c in optional if kept[c].isna().all()])


def render(frame: pd.DataFrame, columns: list[str] | None = None) -> str:
    """A GitHub-markdown table; a value that was not measured shows empty."""
    from tabulate import tabulate

    cells = shown(frame, columns)
    cells = cells.astype(object).where(cells.notna(), None)
    # Text columns stay text: a run id of digits alone ("12345678") must not print as 1.23e+07.
    text = [i for i, c in enumerate(cells.columns) if cells[c].map(lambda v: isinstance(v, str)).any()]
    return tabulate(
        cells, headers="keys", tablefmt="github", showindex=False, floatfmt=".3g", missingval="", disable_numparse=text
    )
