"""MLflow records: a parent run per suite invocation, a child run per task (flat metric names)."""

from __future__ import annotations

import platform as host
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

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


def device_name(device: str) -> str:
    import torch

    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return host.processor() or host.machine()


def check_store_exists(tracking_uri: str) -> None:
    """A command that only reads must not create a store: an embedded store (a SQLite file or a
    folder) has to exist already. A server's URI is left to the server to answer."""
    from urllib.parse import urlparse

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


class Recorder:
    def __init__(self, tracking_uri: str, experiment: str):
        self.tracking_uri = tracking_uri
        try:
            self.client = mlflow_client(tracking_uri)
            found = self.client.get_experiment_by_name(experiment)
            self.experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        except Exception as exc:  # mlflow raises many types for an unreachable or broken store
            raise ForgeBenchError(
                f"the MLflow store at '{tracking_uri}' cannot be used ({type(exc).__name__}: {str(exc)[:200]}); "
                "check MLFLOW_TRACKING_URI or the tracking_uri setting."
            ) from exc

    def start_suite(self, tags: dict[str, str], config: dict) -> str:
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"{tags['agent']}-{tags['model']}",
            tags={
                **tags,
                "git_sha": git_sha(),
                "device": device_name(config["platform"]["device"]),
                "forgebench.kind": "suite",
            },
        )
        self.client.log_dict(run.info.run_id, config, "config.json")
        return run.info.run_id

    def record_task(self, parent_run_id: str, task: Task, outcome: AgentOutcome, folder: Path, wall_s: float) -> str:
        best = outcome.best
        parent_tags = self.client.get_run(parent_run_id).data.tags
        run = self.client.create_run(
            self.experiment_id,
            run_name=task.id,
            tags={
                "mlflow.parentRunId": parent_run_id,
                "forgebench.kind": "task",
                "task": task.id,
                "source": task.source,
                "operator": task.operator or "unknown",
                "stop_reason": outcome.stop_reason,
                **{k: parent_tags[k] for k in ("agent", "model", "platform", "suite", "device") if k in parent_tags},
            },
        )
        run_id = run.info.run_id
        totals = outcome.tree.totals()
        metrics = {"correct": float(best is not None), "wall_s": wall_s, **totals}
        if best is not None:
            result = best.result
            metrics.update(
                speedup_vs_eager=result.speedup_vs_eager,
                time_ms=result.time_ms,
                speedup_vs_compile=result.speedup_vs_compile,
                sol_fraction=result.sol_fraction,
                host_ms=result.host_ms,
                **result.baselines,
                **result.baselines_host_ms,
            )
            self.client.log_text(run_id, best.source, "best_kernel.py")
            self.client.log_dict(run_id, result.to_dict(), "best_result.json")
        now = int(time.time() * 1000)
        from mlflow.entities import Metric

        self.client.log_batch(
            run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items() if v is not None]
        )
        for artifact in (folder / "tree.jsonl", folder / "transcripts"):
            if artifact.is_dir():
                self.client.log_artifacts(run_id, str(artifact), artifact.name)
            elif artifact.is_file():
                self.client.log_artifact(run_id, str(artifact))
        self.client.set_terminated(run_id)
        return run_id

    def end_suite(self, parent_run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(parent_run_id, status=status)
