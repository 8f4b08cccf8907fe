"""`forgebench e2e`: a suite run's best kernels back in the model they were captured from.

Finds the run (its MLflow id or its run_dir), the tasks of that model it solved and each one's best
correct kernel; runs the model with them in a worker process of its own (model_run.py, scrubbed
environment); records an MLflow run of kind `e2e` with the decisions as an artifact.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from harness import process_group
from harness.config import task_patterns
from harness.errors import ForgeBenchError
from harness.integrate.e2e_record import E2EResult
from harness.integrate.e2e_report import summary_metrics
from harness.tasks import Task, select


def model_name(spec: str) -> str:
    """The name capture gave the model's tasks (their `source`)."""
    return spec.partition(":")[0].rsplit(".", 1)[-1] if ":" in spec else spec


def find_run(run: str, tracking_uri: str, experiment: str):
    """The suite's MLflow run, by id or by its run_dir; ForgeBenchError naming what was tried."""
    from harness.record import check_store_exists, mlflow_client

    check_store_exists(tracking_uri)
    client = mlflow_client(tracking_uri)
    if Path(run).is_dir():
        found = client.get_experiment_by_name(experiment)
        query = f"tags.`forgebench.kind` = 'suite' and tags.run_dir = '{Path(run).resolve()}'"
        runs = client.search_runs([found.experiment_id], query, max_results=1) if found else []
        if not runs:
            raise ForgeBenchError(
                f"--run {run}: no suite run in '{tracking_uri}' (experiment {experiment}) has this run_dir; "
                "pass the store the suite recorded to (--tracking-uri) or the suite run's MLflow id."
            )
        return client, runs[0]
    if len(run) < 32:  # a prefix of a suite run's id, as the leaderboard shows them
        from harness.record import match_run_id

        known = client.get_experiment_by_name(experiment)
        suites = client.search_runs([known.experiment_id], "tags.`forgebench.kind` = 'suite'") if known else []
        run = match_run_id([r.info.run_id for r in suites], run)
    try:
        found = client.get_run(run)
    except Exception as exc:
        raise ForgeBenchError(
            f"--run {run}: neither a run folder nor a run id in '{tracking_uri}' ({type(exc).__name__}); "
            "pass a suite's run_dir or its MLflow run id (forgebench leaderboard --format json lists them)."
        ) from exc
    kind = found.data.tags.get("forgebench.kind")
    if kind != "suite" or "suite" not in found.data.tags:
        raise ForgeBenchError(
            f"--run {run}: that MLflow run is a {kind or 'non-ForgeBench'} run, not a suite run; pass the suite "
            "run's id (a task run's parent) or its run_dir."
        )
    return client, found


def suite_tasks(client, suite) -> str | list[str]:
    """The task patterns the suite run selected, from the config it recorded (its `suite` tag is a
    task set's name, such as gpu-offline, when one was chosen, not a pattern)."""
    try:
        config = json.loads(Path(client.download_artifacts(suite.info.run_id, "config.json")).read_text())
    except Exception as exc:
        raise ForgeBenchError(
            f"suite run {suite.info.run_id} has no readable config.json artifact ({type(exc).__name__}); "
            "its tasks cannot be known: run the suite again with this ForgeBench."
        ) from exc
    return task_patterns(config)


def best_kernels(run_dir: Path, tasks: list[Task]) -> dict[str, tuple[str, float]]:
    """Each task's best correct kernel in the run: {task id: (source, isolated speedup over eager)}."""
    from harness.agents.tree import SearchTree

    found = {}
    for task in tasks:
        path = run_dir / "tasks" / task.id / "tree.jsonl"
        best = SearchTree(path).best() if path.is_file() else None
        if best is not None and best.source:
            found[task.id] = (best.source, best.speedup)
    return found


def run_e2e(
    spec: str,
    run: str,
    tracking_uri: str,
    experiment: str,
    device: str,
    out: Path,
    extra_kernels: dict[str, Path],
    budget_ms: float = 1000.0,
    kernel_budget_ms: float = 200.0,
    timeout_s: float = 1800.0,
    overrides: list[str] | None = None,
    compile: bool = True,
    modes: list[str] | None = None,
    reuse_blocks: bool = True,
) -> dict:
    client, suite = find_run(run, tracking_uri, experiment)
    tags = suite.data.tags
    run_dir = Path(tags.get("run_dir", ""))
    name = model_name(spec)
    tasks = [t for t in select(suite_tasks(client, suite), keep_broken=True) if isinstance(t, Task)]
    tasks = [t for t in tasks if t.source == name]
    if not tasks:
        raise ForgeBenchError(
            f"--model {spec}: suite run {suite.info.run_id} has no task captured from '{name}' (its suite is "
            f"{tags['suite']}); pass the model its tasks came from."
        )
    unknown = sorted(set(extra_kernels) - {t.id for t in tasks})
    if unknown:
        raise ForgeBenchError(
            f"--kernel {unknown[0]}=...: no task of this model has that id; see `forgebench tasks list`."
        )
    kernels = best_kernels(run_dir, tasks)
    for tid, path in extra_kernels.items():
        if not path.is_file():
            raise ForgeBenchError(f"--kernel {tid}={path}: no such file; give a .py file defining ModelNew.")
        kernels[tid] = (path.read_text(), None)
    out = out.resolve()  # the model run starts in it, and reads every path in its request from there
    out.mkdir(parents=True, exist_ok=True)
    (out / "kernels").mkdir(exist_ok=True)
    entries = _entries(tasks, kernels, out)
    request = {
        "model": spec,
        "device": device,
        "tasks": entries,
        "budget_ms": budget_ms,
        "kernel_budget_ms": kernel_budget_ms,
        "result_path": str(out / "model_run.json"),
        # conf/capture/ entries changed for this run (fewer sampling steps, say): the model then runs
        # another workload than the capture timed, and the Amdahl prediction is the captured one's.
        "overrides": list(overrides or []),
        # torch.compile of a whole LLM request (prefill and decode steps unrolled) takes Inductor
        # many minutes: the user may leave both compiled variants out, and the table says so.
        "compile": compile,
        # The execution modes to weigh the kernels in (modes.py); None: every mode the device runs.
        **({"modes": list(modes)} if modes else {}),
        # Each distinct repeated block traced once (blocks.py), or the whole model in one trace.
        "reuse_blocks": reuse_blocks,
        # The capture's GPU time of a forward (the sum its shares are fractions of): a mode's Amdahl
        # takes each replaced op at its captured time within the mode's own measured whole.
        "captured_ms": None if overrides else captured_ms(tasks, device),
    }
    (out / "request.json").write_text(json.dumps(request, indent=1))
    found = _model_run(out, timeout_s)
    found.update(model=name, model_spec=spec, source_run=suite.info.run_id, tasks_of_model=len(tasks), request=request)
    found["tasks_without_kernel"] = sorted(t.id for t in tasks if t.id not in kernels)
    found = E2EResult.read(found).to_dict()  # checked against the record's types before it is kept
    (out / "e2e.json").write_text(json.dumps(found, indent=1, default=str))
    found["run_id"] = record(client, suite, found, out)
    (out / "e2e.json").write_text(json.dumps(found, indent=1, default=str))  # now with its record's id
    return found


def captured_ms(tasks: list[Task], device: str) -> float | None:
    """The capture's time of one forward, summed over every call group it timed (its manifest's
    total_time_ms, of which the tasks' time_share are fractions), where the capture timed on this
    kind of device; None where unknown (a task set of no manifest, or one timed elsewhere)."""
    import yaml

    for folder in {t.reference_path.parent.parent for t in tasks}:
        manifest = folder / "manifest.yaml"
        if not manifest.is_file():
            continue
        try:
            found = yaml.safe_load(manifest.read_text()) or {}
        except yaml.YAMLError:
            return None  # `forgebench tasks validate` names a broken manifest; the prediction falls back
        timed_on = str((found.get("timing") or {}).get("device", ""))
        total = found.get("total_time_ms")
        if isinstance(total, (int, float)) and total > 0 and timed_on == device.split(":")[0]:
            return float(total)
    return None


def _entries(tasks: list[Task], kernels: dict[str, tuple[str, float | None]], out: Path) -> list[dict]:
    """The model run's task entries: each task with a kernel, its kernel written under out/kernels."""
    entries = []
    for task in tasks:
        if task.id not in kernels:
            continue
        source, speedup = kernels[task.id]
        path = out / "kernels" / f"{task.id}.py"
        path.write_text(source)
        entries.append(
            {
                "id": task.id,
                "reference_path": str(task.reference_path),
                "kernel_path": str(path),
                "tolerance": task.tolerance,
                "time_share": task.time_share,
                "call_count": task.call_count,
                "isolated_speedup": speedup,
            }
        )
    return entries


def _model_run(out: Path, timeout_s: float) -> dict:
    """model_run.py in its own process, with the sandbox's scrubbed environment: the kernels are
    model-written code and no key of ours reaches them."""
    import os

    from harness.evaluate.sandbox import base_env

    # The harness, the folder the user runs from (where a module:factory lives, as for capture),
    # then whatever the user's PYTHONPATH holds.
    paths = [str(Path(__file__).resolve().parents[2]), os.getcwd()] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    env = {**base_env(), "PYTHONPATH": os.pathsep.join(paths)}
    started, log = time.monotonic(), out / "model_run.log"
    (out / "model_run.json").unlink(missing_ok=True)  # an earlier run's, in the same folder
    # Its phases reach the user's terminal as they happen (stderr); what the kernels print, the log.
    try:
        with log.open("w") as printed:
            command = [sys.executable, "-m", "harness.integrate.model_run", str(out / "request.json")]
            returncode = process_group.run(command, timeout_s, env=env, cwd=out, stdout=printed)
    except subprocess.TimeoutExpired as exc:
        partial = out / "model_run.partial.json"
        try:
            reached = json.loads(partial.read_text()).get("reached")
        except (OSError, ValueError):
            reached = None
        so_far = f"; it had {reached}, and what it measured is in {partial}" if reached else ""
        raise ForgeBenchError(
            f"the model run took over {timeout_s:.0f} s and was stopped{so_far} (raise --timeout-s)."
        ) from exc
    result = out / "model_run.json"
    if not result.is_file():
        raise ForgeBenchError(
            f"the model run ended without a result (exit {returncode}); its errors are printed above, "
            f"and what it printed is in {log}."
        )
    found = json.loads(result.read_text())
    if "error" in found:
        raise ForgeBenchError(f"the model run failed: {found['error']} (traceback in {result})")
    found["wall_s"] = time.monotonic() - started
    return found


def record(client, suite, found: dict, out: Path) -> str:
    """An MLflow run of kind e2e, in the suite's experiment: its figures, and the decisions file."""
    from mlflow.entities import Metric

    tags = {
        "forgebench.kind": "e2e",
        "model": found["model"],
        "source_run": suite.info.run_id,
        "platform": suite.data.tags.get("platform", ""),
        "device": found["env"].get("device_name", found["env"].get("device", "")),
        "agent": suite.data.tags.get("agent", ""),
        "model.label": suite.data.tags.get("model.label", ""),
        "patched_vs_eager": found["patched_vs_eager"],
        "patched_compile_vs_compile": found.get("patched_compile_vs_compile", ""),
        "overrides": " ".join(found["request"].get("overrides", [])),
        # Each mode the kernels were weighed in, and those the guard refused (e2e_record.ModeResult).
        "modes": " ".join(m for m, r in found.get("modes", {}).items() if not r.get("refused")),
    }
    run = client.create_run(suite.info.experiment_id, run_name=f"e2e-{found['model']}", tags=tags)
    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, 0) for k, v in summary_metrics(found).items()]
    client.log_batch(run.info.run_id, metrics=metrics)
    client.log_artifact(run.info.run_id, str(out / "e2e.json"))
    client.log_dict(run.info.run_id, {"decisions": found["decisions"]}, "decisions.json")
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def latest_e2e(run: str, spec: str, tracking_uri: str, experiment: str) -> dict:
    """The newest e2e record of this model on this suite run, as e2e.json holds it."""
    client, suite = find_run(run, tracking_uri, experiment)
    name = model_name(spec)
    query = f"tags.`forgebench.kind` = 'e2e' and tags.source_run = '{suite.info.run_id}' and tags.model = '{name}'"
    runs = client.search_runs([suite.info.experiment_id], query, order_by=["attributes.start_time DESC"], max_results=1)
    if not runs:
        raise ForgeBenchError(
            f"no e2e run of {name} on suite run {suite.info.run_id}; "
            f"run `forgebench e2e --model {spec} --run {run}` first."
        )
    path = client.download_artifacts(runs[0].info.run_id, "e2e.json")
    found = json.loads(Path(path).read_text())
    found["run_id"] = runs[0].info.run_id
    return found
