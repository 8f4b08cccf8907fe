"""The model back together: one row per `forgebench e2e` record (kind e2e), a table per model."""

from __future__ import annotations

import pandas as pd

from leaderboard.table import Layout, _search

COLUMNS = [
    "model",
    "agent",
    "provider",
    "platform",
    "device",
    "kernels_kept",
    "kernels_rejected",
    "share_of_time_replaced",
    "e2e_speedup_vs_eager",
    "e2e_speedup_vs_compile",
    "e2e_prefill_speedup_vs_eager",
    "e2e_decode_speedup_vs_eager",
    "predicted_speedup",
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


def e2e_runs(tracking_uri: str, experiment: str) -> pd.DataFrame:
    """Every e2e record in the experiment, newest first; task_set names the model's table."""
    from harness.record import mlflow_client

    client = mlflow_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    rows = []
    if found is not None:
        for run in _search(client, found.experiment_id, "tags.`forgebench.kind` = 'e2e'"):
            tags = run.data.tags
            rows.append(
                {
                    **run.data.metrics,
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
            )
    if not rows:
        return pd.DataFrame(columns=["task_set", *COLUMNS])
    return pd.DataFrame(rows).sort_values("started", ascending=False).reset_index(drop=True)
