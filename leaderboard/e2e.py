"""The model back together: one row per `forgebench e2e` record (kind e2e) and execution mode, a
table per model. Each record is read through its one type (harness.integrate.e2e_record), from the
e2e.json it carries; a record without one (written by hand, or by an older ForgeBench) gives its
eager row from its metrics."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from leaderboard.table import Layout, _search

COLUMNS = [
    "model",
    "mode",
    "agent",
    "provider",
    "platform",
    "device",
    "kernels_kept",
    "kernels_rejected",
    "share_of_time_replaced",
    "e2e_speedup_vs_eager",
    "mode_speedup",
    "e2e_speedup_vs_compile",
    "e2e_prefill_speedup_vs_eager",
    "e2e_decode_speedup_vs_eager",
    "predicted_speedup",
    "realization",
    "mode_vs_eager",
    "refused",
    "max_output_error",
    "tokens_match",
    "overrides",
    "source_run",
    "run",
]
# A table per model (task_set "e2e: <model>"), its heading counting the e2e runs in it: the suite
# runs they came from (parent_run_id) may be fewer, one suite run's kernels tried in several e2e runs.
LAYOUT = Layout(
    COLUMNS,
    ["task_set", *COLUMNS, "eager_ms", "patched_eager_ms", "compile_ms", "parent_run_id"],
    table_name="",
    run_key="run_id",
    run_noun="e2e run",
)


def _record(client, run):
    """The run's e2e.json as an E2EResult, or None where it has none."""
    from harness.integrate.e2e_record import E2EResult

    if not any(a.path == "e2e.json" for a in client.list_artifacts(run.info.run_id)):
        return None
    return E2EResult.read(json.loads(Path(client.download_artifacts(run.info.run_id, "e2e.json")).read_text()))


def _mode_rows(record, metrics: dict) -> list[dict]:
    """A row per mode: in eager, the record's metrics (prefill and decode apart, output error); in
    another mode, the patched model against that mode alone, and the mode alone against eager."""
    if record is None or not record.modes:
        return [{**metrics, "mode": "eager"}]
    rows = []
    for mode in record.modes.values():
        if mode.mode.value == "eager":
            row = {**metrics, "realization": mode.realization}
        else:
            row = {
                "kernels_kept": len(mode.kept),
                "e2e_speedup_vs_eager": None,
                "predicted_speedup": mode.predicted_speedup,
                "realization": mode.realization,
                "max_output_error": mode.agreement.get("max_output_error"),
                "tokens_match": mode.agreement.get("tokens_match"),
            }
        row.update(mode=mode.mode.value, mode_speedup=mode.speedup, mode_vs_eager=mode.base_vs_eager)
        rows.append({**row, "refused": mode.refused})
    return rows


def e2e_runs(tracking_uri: str, experiment: str) -> pd.DataFrame:
    """Every e2e record in the experiment, a row per mode, newest first; task_set names the model's table."""
    from harness.record import mlflow_client

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a bar per e2e.json read
    client = mlflow_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    rows = []
    if found is not None:
        for run in _search(client, found.experiment_id, "tags.`forgebench.kind` = 'e2e'"):
            tags = run.data.tags
            rows += [
                {
                    **by_mode,
                    "model": tags.get("model"),
                    "agent": tags.get("agent"),
                    "provider": tags.get("model.label"),
                    "platform": tags.get("platform"),
                    "device": tags.get("device"),
                    "overrides": tags.get("overrides") or None,  # a workload changed from the captured one
                    "source_run": (tags.get("source_run") or "")[:8],
                    "parent_run_id": tags.get("source_run"),
                    "run": run.info.run_id[:8],
                    "run_id": run.info.run_id,
                    "started": run.info.start_time,
                    "task_set": f"e2e: {tags.get('model')}",
                }
                for by_mode in _mode_rows(_record(client, run), run.data.metrics)
            ]
    if not rows:
        return pd.DataFrame(columns=["task_set", *COLUMNS])
    return pd.DataFrame(rows).sort_values("started", ascending=False).reset_index(drop=True)
