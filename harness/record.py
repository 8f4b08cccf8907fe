"""MLflow records: a parent run per suite invocation, a child run per task (flat metric names)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import platform as host
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from harness.errors import ForgeBenchError

if TYPE_CHECKING:
    from harness.agents.base import AgentOutcome
    from harness.tasks import Task


def git_sha() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=10,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def environment(device: str) -> dict[str, str]:
    """Where the numbers were measured, as `env.*` tags: device, driver, CUDA, torch, triton, python
    (the platform's device adapter names the first three)."""
    import torch

    from harness import devices

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "none"
    adapter = devices.load(device)
    present = adapter.available() is None
    return {
        "env.device": adapter.device_name() if present else f"{device} (none here)",
        "env.driver": adapter.driver() if present else "none",
        "env.cuda": (torch.version.cuda or "none") if present and adapter.asynchronous else "none",
        "env.torch": torch.__version__,
        "env.triton": triton_version,
        "env.python": host.python_version(),
    }


def config_hash(config: dict) -> str:
    """12 hex of a composed configuration (JSON, sorted keys): runs of one agent setting share it."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]


def api_host(api_base: str | None) -> str | None:
    """The host and port of a provider's URL, never its path, query or any key in it."""
    if not api_base:
        return None
    parsed = urlparse(api_base)
    return parsed.hostname + (f":{parsed.port}" if parsed.port else "") if parsed.hostname else None


# The kinds of parent run whose task runs a leaderboard ranks: an agent's suite run, and a published
# set of solutions regraded here (forgebench regrade).
PARENT_KINDS = ("suite", "regrade")

# What every task run inherits from its suite run.
INHERITED_TAGS = ("agent", "model", "model.label", "model.api_host", "platform", "suite", "task_set")
INHERITED_TAGS += ("agent_config_hash", "device", "env.device", "env.driver", "env.cuda", "env.torch", "env.triton")
INHERITED_TAGS += ("env.python", "torch_ops")


def step_metrics(nodes: list, now_ms: int) -> list:
    """One value per candidate evaluated, step = its round: the best correct speedup so far and the
    cumulative cost, tokens and wall time (model calls without code count toward the totals)."""
    from mlflow.entities import Metric

    metrics, best, cost, tokens, wall, step = [], 0.0, 0.0, 0, 0.0, 0
    for node in nodes:
        cost, tokens, wall = cost + node.cost_usd, tokens + node.tokens_in + node.tokens_out, wall + node.wall_s
        if node.result is None:
            continue
        step += 1
        best = max(best, node.speedup)
        for key, value in (("best_speedup", best), ("cum_cost_usd", cost), ("cum_tokens", tokens)):
            metrics.append(Metric(key, float(value), now_ms + step, step))
        metrics.append(Metric("cum_wall_s", float(wall), now_ms + step, step))
    return metrics


# The store and experiment a run records to unless told otherwise (harness/schema.py's defaults).
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "forgebench"


def store(tracking_uri: str | None = None, experiment: str | None = None) -> tuple[str, str]:
    """The store and experiment a reading command uses: the ones given, else MLFLOW_TRACKING_URI or
    the embedded default, as a run would record them (without composing the whole configuration)."""
    import os

    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    return uri, experiment or DEFAULT_EXPERIMENT


def check_store_exists(tracking_uri: str) -> None:
    """A command that only reads must not create a store: an embedded store (a SQLite file or a
    folder) has to exist already. A server's URI is left to the server to answer."""
    parsed = urlparse(tracking_uri)
    if parsed.scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute.db: what follows the third slash is the path.
        path = Path(tracking_uri.split(":///", 1)[1]) if ":///" in tracking_uri else None
    elif parsed.scheme in ("", "file"):
        path = Path(parsed.path)
    else:
        return
    if path is not None and not path.exists():
        raise ForgeBenchError(
            f"no MLflow store at '{tracking_uri}' ({path} does not exist); run `pytest suite/` in this folder "
            "first, or pass the store the runs went to (--tracking-uri or MLFLOW_TRACKING_URI)."
        )


def check_experiment(tracking_uri: str, experiment: str) -> None:
    """A reading command names an experiment the store has (the default one may not exist yet: the
    command then says the store holds no runs)."""
    if experiment == DEFAULT_EXPERIMENT:
        return
    names = [e.name for e in mlflow_client(tracking_uri).search_experiments()]
    if experiment not in names:
        raise ForgeBenchError(
            f"--experiment {experiment}: the store '{tracking_uri}' has no such experiment; it has "
            f"{', '.join(sorted(names)) or 'none'}."
        )


def match_run_id(ids, prefix: str) -> str:
    """The one suite run id among `ids` that starts with `prefix` (6 characters or more): every
    command that takes a run id takes a unique prefix, as the leaderboard shows 8."""
    if len(prefix) < 6:
        raise ForgeBenchError(f"run id '{prefix}' is too short; give 6 or more characters of a suite run's id.")
    matches = sorted({run for run in ids if isinstance(run, str) and run.startswith(prefix)})
    if not matches:
        raise ForgeBenchError(
            f"no suite run's id starts with '{prefix}'; `forgebench leaderboard` lists the runs (column run)."
        )
    if len(matches) > 1:
        raise ForgeBenchError(f"'{prefix}' starts {len(matches)} suite runs' ids ({', '.join(matches)}); give more.")
    return matches[0]


def mlflow_client(tracking_uri: str):
    """An MlflowClient, without the store's start-up chatter (schema INFO lines, an SQLAlchemy
    deprecation) that would bury the suite's own output."""
    import logging
    import warnings

    from mlflow.tracking import MlflowClient

    # After the import: mlflow sets up its own loggers when it loads.
    warnings.filterwarnings("ignore", message=".*noload.*")
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)

    return MlflowClient(tracking_uri=tracking_uri)


def result_metrics(result) -> dict[str, float | None]:
    """A correct kernel's figures as a task run's metrics (docs/records.md), None where not measured."""
    return {
        **{f"speedup_vs_{name}": value for name, value in result.speedups.items()},
        "speedup_vs_eager": result.speedup_vs_eager,
        "speedup_vs_compile": result.speedup_vs_compile,
        "speedup_vs_best": result.speedup_vs_best,
        "time_ms": result.time_ms,
        "time_p20_ms": result.time_p20_ms,
        "time_p80_ms": result.time_p80_ms,
        "sol_fraction": result.sol_fraction,
        "host_ms": result.host_ms,
        # Metric names of the records contract (docs/records.md): "<baseline>_ms", "<baseline>_host_ms".
        **{f"{name}_ms": ms for name, ms in result.baselines.items()},
        **{f"{name}_host_ms": ms for name, ms in result.baselines_host_ms.items()},
        # Building a baseline (Inductor's compile, FlashInfer's nvcc JIT) is set apart from its time.
        **{f"{name}_setup_s": s for name, s in result.baselines_setup_s.items()},
    }


def result_tags(result) -> dict[str, str]:
    """A correct kernel's best baseline and, under evaluate.torch_ops=allow, the PyTorch ops it kept."""
    tags = {"best_baseline": result.best_baseline} if result.best_baseline else {}
    if result.torch_ops:
        tags["torch_ops_used"] = ", ".join(result.torch_ops)[:5000]
    return tags


class Recorder:
    def __init__(self, tracking_uri: str, experiment: str):
        self.tracking_uri = tracking_uri
        try:
            self.client = mlflow_client(tracking_uri)
            self.experiment_id = self._experiment(experiment)
        except Exception as exc:  # mlflow raises many types for an unreachable or broken store
            raise ForgeBenchError(
                f"the MLflow store at '{tracking_uri}' cannot be used ({type(exc).__name__}: {str(exc)[:200]}); "
                "check MLFLOW_TRACKING_URI or the tracking_uri setting."
            ) from exc

    def _experiment(self, name: str) -> str:
        """The experiment's id, made if missing. Two suites starting at once on a team's server may
        both find it missing: the one whose create fails reads the other's."""
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(name)
        if found:
            return found.experiment_id
        try:
            return self.client.create_experiment(name)
        except MlflowException:
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def start_suite(self, tags: dict[str, str], config: dict) -> str:
        """The suite run: a new one, or (a run resumed over the same run_dir) the one it started."""
        return self.start_parent("suite", tags, config)

    def start_parent(self, kind: str, tags: dict[str, str], config: dict, same: tuple[str, ...] = ()) -> str:
        """A parent run of `kind` (suite, regrade): a new one, or the one started before over the same
        run_dir (and the same values of the tags `same` names), resumed."""
        tags = {**tags, "git_sha": git_sha(), "forgebench.kind": kind}
        query = " and ".join(
            [f"tags.`forgebench.kind` = '{kind}'"] + [f"tags.`{key}` = '{tags[key]}'" for key in ("run_dir", *same)]
        )
        with self._writing():
            earlier = self.client.search_runs([self.experiment_id], query, max_results=1)
            if earlier:
                run_id = earlier[0].info.run_id
                self.client.update_run(run_id, status="RUNNING")
                for key, value in tags.items():
                    self.client.set_tag(run_id, key, value)
            else:
                name = f"{tags['agent']}-{tags['model.label']}"
                run_id = self.client.create_run(self.experiment_id, run_name=name, tags=tags).info.run_id
            self.client.log_dict(run_id, config, "config.json")
        return run_id

    def _forget_task(self, parent_run_id: str, task_id: str) -> None:
        """A task recorded before a kill and run again on resume is recorded once: the new run replaces it."""
        query = f"tags.`mlflow.parentRunId` = '{parent_run_id}' and tags.task = '{task_id}'"
        for run in self.client.search_runs([self.experiment_id], query):
            self.client.delete_run(run.info.run_id)

    @contextlib.contextmanager
    def _writing(self):
        """One writer at a time on an embedded SQLite store (xdist workers record side by side;
        SQLite refuses a second writer with 'database is locked'). A server serialises itself."""
        if not self.tracking_uri.startswith("sqlite:///"):
            yield
            return
        lock_path = Path(self.tracking_uri.split(":///", 1)[1] + ".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def record_task(self, parent_run_id: str, task: Task, outcome: AgentOutcome, folder: Path, wall_s: float) -> str:
        with self._writing():
            return self._record_task(parent_run_id, task, outcome, folder, wall_s)

    def _record_task(self, parent_run_id: str, task: Task, outcome: AgentOutcome, folder: Path, wall_s: float) -> str:
        from mlflow.entities import Metric

        self._forget_task(parent_run_id, task.id)
        best = outcome.best
        parent_tags = self.client.get_run(parent_run_id).data.tags
        run = self.client.create_run(
            self.experiment_id,
            start_time=int((time.time() - wall_s) * 1000),  # a resumed task began before the kill
            run_name=task.id,
            tags={
                "mlflow.parentRunId": parent_run_id,
                "forgebench.kind": "task",
                "task": task.id,
                "task_hash": task.content_hash,
                "source": task.source,
                "operator": task.operator or "unknown",
                "stop_reason": outcome.stop_reason,
                # A fused task's ATen calls, which the leaderboard's prediction weighs (leaderboard/predicted.py).
                **({"members": ",".join(task.members)} if task.members else {}),
                **{k: parent_tags[k] for k in INHERITED_TAGS if k in parent_tags},
            },
        )
        run_id = run.info.run_id
        metrics = {"correct": float(best is not None), "wall_s": wall_s, **outcome.tree.totals()}
        metrics["time_share"] = task.time_share  # a captured task's share of its model's time
        if best is not None:
            result = best.result
            metrics.update(result_metrics(result))
            for key, value in result_tags(result).items():
                self.client.set_tag(run_id, key, value)
            self.client.log_text(run_id, best.source, "best_kernel.py")
            self.client.log_dict(run_id, result.to_dict(), "best_result.json")
        now = int(time.time() * 1000)
        finals = [Metric(k, float(v), now, 0) for k, v in metrics.items() if v is not None]
        every = finals + step_metrics(outcome.tree.nodes, now)
        for start in range(0, len(every), 1000):  # MLflow takes at most 1000 metrics a batch
            self.client.log_batch(run_id, metrics=every[start : start + 1000])
        for artifact in (folder / "tree.jsonl", folder / "transcripts"):
            if artifact.is_dir():
                self.client.log_artifacts(run_id, str(artifact), artifact.name)
            elif artifact.is_file():
                self.client.log_artifact(run_id, str(artifact))
        self.client.set_terminated(run_id)
        return run_id

    def end_suite(self, parent_run_id: str, status: str = "FINISHED") -> None:
        """End the suite run (its aggregates are computed where they are read: `forgebench leaderboard`)."""
        with self._writing():
            self.client.set_terminated(parent_run_id, status=status)
