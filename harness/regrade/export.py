"""`forgebench export --layout kernelbench`: a suite run's best kernels in KernelBench's runs layout,
so another harness can grade ForgeBench's results and `forgebench regrade` can be run on any run.

OUT gets `level_L_problem_P_sample_0_kernel.py` per task with a correct kernel, `eval_results.json`
in KernelBench's shape ({problem: [{sample_id, compiled, correctness, runtime, ...}]}, with the
eager time as `ref_runtime` and the level of each entry) and `problems/level<L>/` holding each task's
reference. A KernelBench task keeps its level and number; the others are numbered in level 0, which
KernelBench does not have, in task-id order.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from harness.errors import ForgeBenchError
from harness.tasks import Task

KERNELBENCH_ID = re.compile(r"(\d+)_\w.*")
OWN_LEVEL = 0


def numbering(tasks: list[Task]) -> dict[str, tuple[int, int]]:
    """Each task's (level, problem number) in the runs layout."""
    placed, own = {}, []
    for task in sorted(tasks, key=lambda t: t.id):
        level = re.fullmatch(r"level(\d+)", task.reference_path.parent.name)
        number = KERNELBENCH_ID.fullmatch(task.id)
        if level and number:
            placed[task.id] = (int(level[1]), int(number[1]))
        else:
            own.append(task)
    placed |= {task.id: (OWN_LEVEL, n) for n, task in enumerate(own, 1)}
    return placed


def export_kernelbench(run: str, tracking_uri: str, experiment: str, out: Path) -> list[Path]:
    """Write the run's best kernels under `out`; returns the kernel files written."""
    from harness.integrate.e2e import find_run, suite_tasks
    from harness.tasks import select

    client, suite = find_run(run, tracking_uri, experiment)
    tasks = {t.id: t for t in select(suite_tasks(client, suite), keep_broken=True) if isinstance(t, Task)}
    query = f"tags.`mlflow.parentRunId` = '{suite.info.run_id}' and tags.`forgebench.kind` = 'task'"
    solved = [r for r in client.search_runs([suite.info.experiment_id], query) if r.data.metrics.get("correct")]
    solved = [r for r in solved if r.data.tags.get("task") in tasks]
    if not solved:
        raise ForgeBenchError(
            f"--run {run}: the suite run has no task with a correct kernel, so there is nothing to export."
        )
    places = numbering([tasks[r.data.tags["task"]] for r in solved])
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict]] = {}
    written = []
    for task_run in sorted(solved, key=lambda r: places[r.data.tags["task"]]):
        task = tasks[task_run.data.tags["task"]]
        level, number = places[task.id]
        kernel = out / f"level_{level}_problem_{number}_sample_0_kernel.py"
        fetched = client.download_artifacts(task_run.info.run_id, "best_kernel.py", str(out))
        Path(fetched).replace(kernel)
        name = task.id if level != OWN_LEVEL else f"{number}_{task.id}"
        reference = out / "problems" / f"level{level}" / f"{name}.py"
        reference.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.reference_path, reference)
        results.setdefault(str(number), []).append(_entry(task, task_run, level))
        written.append(kernel)
    (out / "eval_results.json").write_text(json.dumps(results, indent=1, allow_nan=False) + "\n")
    return written


def _entry(task: Task, task_run, level: int) -> dict:
    metrics = task_run.data.metrics
    return {
        "sample_id": 0,
        "level": level,
        "compiled": True,
        "correctness": True,
        "runtime": metrics.get("time_ms"),
        "ref_runtime": metrics.get("eager_ms"),
        "metadata": {
            "task": task.id,
            "task_hash": task_run.data.tags.get("task_hash"),
            "forgebench_run": task_run.data.tags.get("mlflow.parentRunId"),
            "device": task_run.data.tags.get("device"),
        },
    }


def main(args) -> int:
    """`forgebench export --layout kernelbench --run RUN OUT`."""
    from harness.record import store

    # Each kernel's download would draw a progress bar on the terminal.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    tracking_uri, experiment = store(args.tracking_uri, args.experiment)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ForgeBenchError(f"export: '{out}' is a file; give a folder to write the runs layout into.")
    written = export_kernelbench(args.run, tracking_uri, experiment, out)
    print(
        f"wrote {len(written)} kernels in KernelBench's runs layout under {out} (eval_results.json, problems/); "
        f"regrade them with: forgebench regrade {out} --problems {out / 'problems'} --label name:LABEL"
    )
    return 0
