"""MLflow to plain records for the site's pages: suite runs, their task runs, step metrics, trees,
and the e2e runs."""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd

from harness.errors import ForgeBenchError

# Step metrics the rounds page draws (docs/records.md: one value per candidate, step = its round).
STEP_METRICS = ("best_speedup", "cum_cost_usd")
# A tracking server is asked several things at once (the calls wait on the network); an embedded
# store answers inside this process, where threads would only contend for the interpreter.
SERVER_FETCH_THREADS = 8
# Transcript ids come from the records, which anyone with access to a team's server can write: only
# a plain name (the content hash, `response-` before it) is read, so none reaches outside transcripts/.
TRANSCRIPT_ID = re.compile(r"[A-Za-z0-9_-]+")


@dataclass
class TaskRun:
    """One task of one suite run, with what its pages show: final metrics, step curves, its tree."""

    run_id: str
    suite_run_id: str
    task: str
    tags: dict[str, str]
    metrics: dict[str, float]
    history: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # metric -> (round, value)
    nodes: list[dict] = field(default_factory=list)  # tree.jsonl, one search-tree node a line
    transcripts: dict[str, dict] = field(default_factory=dict)  # prompt or response id -> its record
    best_kernel: str | None = None

    @property
    def correct(self) -> bool:
        return self.metrics.get("correct", 0.0) > 0

    @property
    def speedup(self) -> float | None:
        """Speedup over eager of the best correct kernel; None without one."""
        value = self.metrics.get("speedup_vs_eager")
        return value if self.correct and value is not None and not math.isnan(value) else None

    @property
    def guarded_speedup(self) -> float:
        """What the guard delivers: the kernel when correct and faster, else PyTorch (1.0)."""
        return max(self.speedup or 1.0, 1.0)


@dataclass
class SuiteRun:
    run_id: str
    tags: dict[str, str]
    metrics: dict[str, float]
    started_ms: int
    tasks: list[TaskRun] = field(default_factory=list)
    name: str = ""  # how pages and legends name the run: label and agent, unique on the site

    @property
    def label(self) -> str:
        """What tells two providers apart (older records have no `model.label`: the model string)."""
        return self.tags.get("model.label") or self.tags.get("model", "?")

    @property
    def task_set(self) -> str:
        """Runs are ranked only within one task set (older records: the suite name)."""
        return self.tags.get("task_set") or self.tags.get("suite", "?")


def _name_runs(suites: list[SuiteRun]) -> None:
    """Label and agent; where two runs share both, the head of the run id tells them apart."""
    names = [f"{s.label} · {s.tags.get('agent', '?')}" for s in suites]
    for suite, name in zip(suites, names):
        suite.name = name if names.count(name) == 1 else f"{name} ({suite.run_id[:8]})"


@dataclass
class Site:
    experiment: str
    suites: list[SuiteRun]
    # One row per suite run, as `forgebench leaderboard` ranks them (leaderboard.table.summarize).
    summary: pd.DataFrame
    # One row per e2e run and execution mode, as `forgebench leaderboard --e2e` reads them.
    e2e: pd.DataFrame = field(default_factory=pd.DataFrame)
    # One row per suite run, captured model and mode, as `forgebench leaderboard --predicted` gives them.
    predicted: pd.DataFrame = field(default_factory=pd.DataFrame)

    def task_sets(self) -> dict[str, list[SuiteRun]]:
        sets: dict[str, list[SuiteRun]] = {}
        for suite in self.suites:
            sets.setdefault(suite.task_set, []).append(suite)
        return sets

    def task_runs(self) -> list[TaskRun]:
        return [task for suite in self.suites for task in suite.tasks]


def _runs(client, experiment_id: str, kind: str) -> list:
    """Every run of one kind, page after page (a store answers at most 50000 runs a call)."""
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id], f"tags.`forgebench.kind` = '{kind}'", max_results=50000, page_token=token
        )
        runs += page
        token = page.token
        if not token:
            return runs


def _artifact_folder(run, tracking_uri: str, scratch: Path) -> Path:
    """Where a run's artifacts can be read: a local store's own folder, in place; a server's, the
    ones pages show downloaded into scratch (a proxied `mlflow-artifacts:` root resolves against the
    tracking server)."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

    repo = get_artifact_repository(run.info.artifact_uri, tracking_uri=tracking_uri)
    if isinstance(repo, LocalArtifactRepository):
        return Path(repo.artifact_dir)
    folder = scratch / run.info.run_id
    folder.mkdir()
    for artifact in repo.list_artifacts():
        if artifact.path in ("tree.jsonl", "transcripts", "best_kernel.py"):
            repo.download_artifacts(artifact.path, str(folder))
    return folder


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _task_run(client, run, tracking_uri: str, scratch: Path) -> TaskRun:
    tags, metrics = run.data.tags, run.data.metrics
    task = TaskRun(run.info.run_id, tags.get("mlflow.parentRunId", ""), tags.get("task", "?"), tags, metrics)
    for key in STEP_METRICS:
        if key in metrics:  # search_runs returns the latest value: the history exists
            points = client.get_metric_history(run.info.run_id, key)
            task.history[key] = sorted((p.step, p.value) for p in points if p.step >= 1)
    folder = _artifact_folder(run, tracking_uri, scratch)
    tree = folder / "tree.jsonl"
    if tree.is_file():
        task.nodes = [json.loads(line) for line in tree.read_text().splitlines() if line.strip()]
    for node in task.nodes:
        for key in (node.get("prompt_id"), node.get("response_id")):
            if isinstance(key, str) and TRANSCRIPT_ID.fullmatch(key):
                record = _read_json(folder / "transcripts" / f"{key}.json")
                if record is not None:
                    task.transcripts[key] = record
    if (folder / "best_kernel.py").is_file():
        task.best_kernel = (folder / "best_kernel.py").read_text()
    return task


def load_site(tracking_uri: str, experiment: str) -> Site:
    """Every suite run of the experiment with its task runs, or a ForgeBenchError when there is none."""
    from harness.record import PARENT_KINDS, mlflow_client
    from leaderboard.e2e import e2e_runs
    from leaderboard.predicted import view
    from leaderboard.table import summarize, task_runs

    # Each artifact download would draw a progress bar on the terminal.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = mlflow_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    no_runs = ForgeBenchError(
        f"no ForgeBench runs in experiment '{experiment}' of {tracking_uri}; run `pytest suite/` first, "
        "or pass the store and experiment the runs went to (--tracking-uri, --experiment)."
    )
    if found is None:
        raise no_runs
    suites = {
        run.info.run_id: SuiteRun(run.info.run_id, run.data.tags, run.data.metrics, run.info.start_time)
        for kind in PARENT_KINDS  # agents' suite runs and regraded sets, side by side
        for run in _runs(client, found.experiment_id, kind)
    }
    children = [
        r for r in _runs(client, found.experiment_id, "task") if r.data.tags.get("mlflow.parentRunId") in suites
    ]
    if not children:
        raise no_runs
    threads = SERVER_FETCH_THREADS if urlparse(tracking_uri).scheme in ("http", "https") else 1
    with tempfile.TemporaryDirectory(prefix="forgebench-site-") as scratch, ThreadPoolExecutor(threads) as pool:
        for task in pool.map(lambda run: _task_run(client, run, tracking_uri, Path(scratch)), children):
            suites[task.suite_run_id].tasks.append(task)
    ordered = sorted((s for s in suites.values() if s.tasks), key=lambda s: s.started_ms, reverse=True)
    for suite in ordered:
        suite.tasks.sort(key=lambda t: t.task)
    _name_runs(ordered)
    tasks, e2e = task_runs(tracking_uri, experiment), e2e_runs(tracking_uri, experiment)
    return Site(experiment, ordered, summarize(tasks), e2e, view(tasks, e2e))
