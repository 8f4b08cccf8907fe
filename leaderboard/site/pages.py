"""What each page shows, as plain data for its template: tables as rows of cells, charts as figures;
links are relative to the site's root (templates and the page script prefix the way up)."""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

import pandas as pd

from leaderboard.site import charts
from leaderboard.site.data import Site, SuiteRun, TaskRun
from leaderboard.site.tree import best_node, node_details, tree_figure
from leaderboard.table import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    PREDICTED_LAYOUT,
    TASK_COLUMNS,
    baselines,
    by_task_set,
    expand,
    shown,
)

# The leaderboard's columns with the run's id first: the tables are wider than a screen, and the
# first column stays in view as they scroll (site.css), so each row keeps saying whose it is.
RUN_COLUMNS = ["run", *(c for c in COLUMNS if c != "run")]


@dataclass(frozen=True)
class Cell:
    text: str
    href: str | None = None
    number: bool = False


def cell(value, href: str | None = None) -> Cell:
    """A table cell: whole numbers as they are and others to three significant figures (as
    `forgebench leaderboard` prints them), a value not measured as a dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Cell("—", href)
    if isinstance(value, bool):
        return Cell("yes" if value else "no", href)
    if isinstance(value, numbers.Integral):
        return Cell(str(value), href, number=True)
    if isinstance(value, numbers.Real):
        return Cell(f"{value:.3g}", href, number=True)
    return Cell(str(value), href)


def slug(text: str) -> str:
    """A file name for a task id or task set (ids may hold '/', '@' or spaces)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.") or "_"


def run_page(run_id: str) -> str:
    return f"runs/{run_id}.html"


def task_page(task: str) -> str:
    return f"tasks/{slug(task)}.html"


def tree_page(task: TaskRun) -> str:
    return f"trees/{task.run_id}.html"


def _summary(site: Site, suites: list[SuiteRun]) -> pd.DataFrame:
    ids = {suite.run_id for suite in suites}
    return site.summary[site.summary["parent_run_id"].isin(ids)]


def index(site: Site) -> dict:
    """One leaderboard per task set, ranked by `leaderboard.table.summarize`."""
    boards = []
    for task_set, suites in site.task_sets().items():
        summary = _summary(site, suites)
        columns = list(shown(summary, RUN_COLUMNS).columns)
        rows = [
            [cell(row[c], run_page(row["parent_run_id"]) if c in ("model", "run") else None) for c in columns]
            for _, row in summary.iterrows()
        ]
        boards.append({"task_set": task_set, "columns": columns, "rows": rows})
    return {"title": "ForgeBench leaderboard", "boards": boards}


def _task_cell(task: TaskRun, column: str) -> Cell:
    if column in ("task", "stop_reason", "best_baseline", "verdict"):
        return cell(task.tags.get(column))
    return cell(task.metrics.get(column))


def run(site: Site, suite: SuiteRun) -> dict:
    summary = _summary(site, [suite])
    columns = list(shown(summary, RUN_COLUMNS).columns)
    # A column per baseline the tasks recorded, and an optional one, only where some task has it
    # (Liger and FlashInfer on a GPU, and only where they have the op).
    every = expand(TASK_COLUMNS, baselines(pd.DataFrame([t.metrics for t in suite.tasks])))
    optional = [c for c in every if c in OPTIONAL_COLUMNS or c not in TASK_COLUMNS]
    task_columns = [c for c in every if c not in optional or any(_task_cell(t, c).text != "—" for t in suite.tasks)]
    rows = [
        [Cell(task.task, task_page(task.task))]
        + [_task_cell(task, c) for c in task_columns if c != "task"]
        + [Cell("tree", tree_page(task))]
        for task in suite.tasks
    ]
    figure = charts.comparison_figure(
        [t.task for t in suite.tasks], {suite.name: [t.speedup for t in suite.tasks]}, "speedup per task"
    )
    tags = {k: suite.tags.get(k, "—") for k in ("agent", "model", "model.label", "platform", "task_set", "device")}
    return {
        "title": suite.name,
        "tags": {**tags, "git_sha": suite.tags.get("git_sha", "—"), "run id": suite.run_id},
        "summary": {"columns": columns, "rows": [[cell(row[c]) for c in columns] for _, row in summary.iterrows()]},
        "tasks": {"columns": [*task_columns, "tree"], "rows": rows},
        "chart": figure,
    }


def task(site: Site, task_id: str) -> dict:
    """Every run on one task, its cost against its speedup, and each run's best kernel."""
    entries = [(s, t) for s in site.suites for t in s.tasks if t.task == task_id]
    columns = ["run", "task_set", "task_hash", "correct", "speedup_vs_eager", "cost_usd", "rounds", "tree"]
    rows = [
        [
            Cell(s.name, run_page(s.run_id)),
            cell(s.task_set),
            cell(t.tags.get("task_hash")),
            cell(t.correct),
            cell(t.speedup),
            cell(t.metrics.get("cost_usd")),
            cell(t.metrics.get("rounds")),
            Cell("tree", tree_page(t)),
        ]
        for s, t in entries
    ]
    # A regraded solution states no cost: it has no point on the cost chart (its row says "—").
    points = [
        charts.CostPoint(s.name, t.metrics["cost_usd"], t.guarded_speedup, tree_page(t))
        for s, t in entries
        if "cost_usd" in t.metrics
    ]
    kernels = [{"run": s.name, "speedup": cell(t.speedup).text, "source": t.best_kernel} for s, t in entries]
    return {
        "title": f"task {task_id}",
        "runs": {"columns": columns, "rows": rows},
        "chart": charts.cost_figure(points, f"{task_id}: cost against speedup"),
        "kernels": [k for k in kernels if k["source"]],
    }


def compare(site: Site) -> dict:
    """Per task set, every run's speedup on every task, side by side."""
    sections = []
    for task_set, suites in site.task_sets().items():
        tasks = sorted({t.task for s in suites for t in s.tasks})
        speedups = {s.name: {t.task: t.speedup for t in s.tasks} for s in suites}
        columns = {name: [by_task.get(task) for task in tasks] for name, by_task in speedups.items()}
        rows = [
            [Cell(task, task_page(task))] + [cell(columns[s.name][i]) for s in suites] for i, task in enumerate(tasks)
        ]
        sections.append(
            {
                "task_set": task_set,
                "columns": ["task", *(s.name for s in suites)],
                "rows": rows,
                "chart": charts.comparison_figure(tasks, columns, f"{task_set}: speedup per task"),
            }
        )
    return {"title": "Runs side by side", "sections": sections}


def cost(site: Site) -> dict:
    """Per task set, each run's total LLM cost against its guarded geomean speedup."""
    names = {suite.run_id: suite.name for suite in site.suites}
    sections = []
    for task_set, suites in site.task_sets().items():
        summary = _summary(site, suites)
        everyone = [
            charts.CostPoint(
                names[row["parent_run_id"]], row["cost_usd"], row["geomean_speedup"], run_page(row["parent_run_id"])
            )
            for _, row in summary.iterrows()
        ]
        # A regraded set states no cost (NaN): listed, with no point on the chart.
        points = [p for p in everyone if not math.isnan(p.cost_usd)]
        # Where nothing cost anything there is no frontier (charts.cost_figure), and no column for it.
        priced = any(p.cost_usd for p in points)
        frontier = set(charts.pareto_frontier(points))
        rows = [
            [Cell(p.name, p.url), cell(p.cost_usd), cell(p.speedup), *([cell(p in frontier)] if priced else [])]
            for p in everyone
        ]
        sections.append(
            {
                "task_set": task_set,
                "chart": charts.cost_figure(points, f"{task_set}: cost against speedup"),
                "columns": ["run", "cost_usd", "geomean_speedup", *(["on the frontier"] if priced else [])],
                "rows": rows,
            }
        )
    return {"title": "Cost against speedup", "sections": sections}


def rounds(site: Site) -> dict:
    """Per task set, best-so-far speedup and cumulative cost at each round, median over tasks."""
    sections = []
    for task_set, suites in site.task_sets().items():
        figures = [
            charts.rounds_figure(
                suites, "best_speedup", f"{task_set}: best speedup so far", "median over tasks (x eager)"
            ),
            charts.rounds_figure(suites, "cum_cost_usd", f"{task_set}: cost so far", "median over tasks (USD)"),
        ]
        sections.append({"task_set": task_set, "charts": [f for f in figures if f is not None]})
    return {"title": "Speedup and cost against rounds", "sections": sections}


def _linked_table(frame: pd.DataFrame, columns: list[str], linked: str, suites: set[str]) -> dict:
    """The frame's rows as cells, the column `linked` a link to the page of the suite run in its
    row's parent_run_id, where that run is on the site."""
    cells = shown(frame, columns)
    link = lambda row, c: run_page(row["parent_run_id"]) if c == linked and row["parent_run_id"] in suites else None
    rows = [[cell(row[c], link(row, c)) for c in cells.columns] for _, row in frame.iterrows()]
    return {"columns": list(cells.columns), "rows": rows}


def e2e(site: Site) -> dict:
    """Each model with a suite run's kernels back in: a row per e2e run and execution mode, as
    `forgebench leaderboard --e2e` prints them; then per task set what each suite run's kernels
    predict for the models their tasks came from (`forgebench leaderboard --predicted`)."""
    from leaderboard.e2e import LAYOUT

    # The e2e run first (it stays in view as the table scrolls), then what each mode did; the model
    # is the section's.
    first = ["run", "mode", "mode_vs_eager", "mode_speedup", "kernels_kept", "predicted_speedup", "realization"]
    columns = [*first, "refused", *(c for c in LAYOUT.shown if c not in (*first, "refused", "model"))]
    suites = {suite.run_id for suite in site.suites}
    tables = lambda frame: by_task_set(frame) if not frame.empty else []
    measured = [
        {"model": rows["model"].iloc[0], **_linked_table(rows, columns, "source_run", suites)}
        for _, rows in tables(site.e2e)
    ]
    predicted = [
        {"task_set": task_set, **_linked_table(rows, PREDICTED_LAYOUT.shown, "run", suites)}
        for task_set, rows in tables(site.predicted)
    ]
    return {"title": "Models end to end", "measured": measured, "predicted": predicted}


def tree(suite: SuiteRun, task: TaskRun) -> dict:
    best = best_node(task.nodes)
    return {
        "title": f"{task.task} · {suite.name}",
        "run_href": run_page(suite.run_id),
        "task_href": task_page(task.task),
        "nodes": node_details(task),
        "best": best,
        "chart": tree_figure(task.nodes, best),
    }
