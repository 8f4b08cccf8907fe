"""What a suite run records (docs/records.md), read back from a real MLflow store, a real provider over
HTTP, pytest-benchmark's JSON and the run's own terminal output."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.llm.offline import OfflineModel
from harness.record import mlflow_client
from tests.loopback_llm import LoopbackLLM
from tests.test_suite import RMSNORM_SMALL, SILU_SMALL, SMALL_PAIR, suite, suite_command, user_env

TASKS = f"tasks={SMALL_PAIR}"
SECRET = "loopback-secret-not-for-records"


def _runs(store: Path, kind: str) -> list:
    client = mlflow_client(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("forgebench")
    return client.search_runs([experiment.experiment_id], f"tags.`forgebench.kind` = '{kind}'")


def _total(store: Path, parent, metric: str) -> float:
    """A suite run's total of a task-run metric (its aggregates live in its task runs: docs/records.md)."""
    children = [c for c in _runs(store, "task") if c.data.tags["mlflow.parentRunId"] == parent.info.run_id]
    return sum(c.data.metrics.get(metric, 0.0) for c in children)


@pytest.mark.slow
def test_a_provider_run_records_comparable_tags_step_metrics_benchmarks_and_progress(tmp_path):
    offline = OfflineModel()
    with LoopbackLLM(lambda messages: offline.complete(messages).text) as server:
        done = suite(
            tmp_path,
            "--agent=refine",
            "--model=openai/loopback-coder",
            "--override",
            TASKS,
            "--rounds=2",
            "--override",
            f"model.api_base={server.api_base}",
            "--override",
            "model.api_key_env=LOOPBACK_KEY",
            "--override",
            "model.input_cost_per_token=0.000002",
            "--override",
            "model.label=loopback-a",
            f"--benchmark-json={tmp_path / 'b.json'}",
            LOOPBACK_KEY=SECRET,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(server.requests) == 4  # 2 tasks x 2 rounds, each prompt about its task
    assert {
        t
        for t in ("rmsnorm_small", "silu_and_mul_small")
        for r in server.requests
        if t in r["body"]["messages"][1]["content"]
    } == {"rmsnorm_small", "silu_and_mul_small"}
    # A line per candidate in a non-TTY log, naming task, round, verdict, best and dollars.
    for task in ("rmsnorm_small", "silu_and_mul_small"):
        assert f"{task}: round 2/2, last correct" in done.stdout, done.stdout[-3000:]
    assert "$0.0" in done.stdout

    (parent,) = _runs(tmp_path / "mlflow.db", "suite")
    tags = parent.data.tags
    assert tags["model.label"] == "loopback-a" and tags["model"] == "openai/loopback-coder"
    assert tags["model.api_host"] == server.api_base.split("//")[1].split("/")[0]
    assert (
        tags["task_set"].startswith("rmsnorm_small,silu_and_mul_small@")
        and tags["suite"] == f"{RMSNORM_SMALL},{SILU_SMALL}"  # the paths as given
    )
    assert {"env.torch", "env.triton", "env.device", "env.driver", "env.cuda", "agent_config_hash"} <= set(tags)
    assert tags["torch_ops"] == "forbid"  # the rule the run was judged by (a captured task is the op)
    assert parent.info.status == "FINISHED"
    assert _total(tmp_path / "mlflow.db", parent, "llm_calls") == 4
    assert _total(tmp_path / "mlflow.db", parent, "cost_usd") > 0

    children = _runs(tmp_path / "mlflow.db", "task")
    assert sorted(r.data.tags["task"] for r in children) == ["rmsnorm_small", "silu_and_mul_small"]
    client = mlflow_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    for child in children:
        assert len(child.data.tags["task_hash"]) == 12 and child.data.tags["model.label"] == "loopback-a"
        assert child.data.metrics["time_p20_ms"] <= child.data.metrics["time_p80_ms"]
        curve = client.get_metric_history(child.info.run_id, "best_speedup")
        assert [m.step for m in sorted(curve, key=lambda m: m.step)] == [1, 2]
        cost = sorted(client.get_metric_history(child.info.run_id, "cum_cost_usd"), key=lambda m: m.step)
        assert 0 < cost[0].value < cost[1].value
        everything = json.dumps([child.data.tags, child.data.params, parent.data.tags, parent.data.params])
        assert SECRET not in everything
    # mlflow.litellm.autolog traced each provider call into the run's experiment.
    assert len(client.search_traces(locations=[parent.info.experiment_id])) == 4
    board = subprocess.run(
        [sys.executable, "-m", "forgebench.cli", "leaderboard", "--per-task"], cwd=tmp_path, env=user_env(),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert board.returncode == 0 and "silu_and_mul_small" in board.stdout, board.stdout + board.stderr

    compared = subprocess.run(
        [str(Path(sys.executable).with_name("pytest-benchmark")), "compare", str(tmp_path / "b.json")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert compared.returncode == 0 and "test_kernel[silu_and_mul_small]" in compared.stdout, compared.stderr
    benchmarks = json.loads((tmp_path / "b.json").read_text())["benchmarks"]
    assert sorted(b["name"] for b in benchmarks) == ["test_kernel[rmsnorm_small]", "test_kernel[silu_and_mul_small]"]
    for entry in benchmarks:
        assert entry["stats"]["rounds"] == 21 and entry["stats"]["min"] <= entry["stats"]["median"]
        assert entry["extra_info"]["speedup_vs_eager"] > 0 and entry["extra_info"]["rounds"] == 2


@pytest.mark.slow
def test_a_run_killed_and_resumed_is_one_finished_run_with_every_tree_and_the_right_totals(tmp_path):
    """kill -9 in the first task's third round, then the same command: the same MLflow run finished,
    each tree whole (the rounds before the kill kept as they were, none asked again), totals right."""
    run_dir = tmp_path / "run"
    command = suite_command("--agent=mcts", "--override", TASKS, "--rounds=3", "--override", f"run_dir={run_dir}")
    tmp_path.chmod(0o711)
    first = subprocess.Popen(
        command, cwd=tmp_path, env=user_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    tree = run_dir / "tasks" / "rmsnorm_small" / "tree.jsonl"
    lines = lambda: tree.read_text().splitlines() if tree.is_file() else []
    deadline = time.monotonic() + 600
    while len(lines()) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first.poll() is None, "the run ended before it could be killed mid-way"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    survivors = [json.loads(line) for line in lines()]
    assert 2 <= len(survivors) < 3
    (killed,) = _runs(tmp_path / "mlflow.db", "suite")
    assert killed.info.status == "RUNNING"  # what a kill -9 leaves

    done = subprocess.run(command, cwd=tmp_path, env=user_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]
    (parent,) = _runs(tmp_path / "mlflow.db", "suite")
    assert parent.info.run_id == killed.info.run_id and parent.info.status == "FINISHED"
    children = _runs(tmp_path / "mlflow.db", "task")
    assert sorted(r.data.tags["task"] for r in children) == ["rmsnorm_small", "silu_and_mul_small"]
    assert _total(tmp_path / "mlflow.db", parent, "llm_calls") == 6
    nodes = [json.loads(line) for line in lines()]
    assert [n["id"] for n in nodes] == [0, 1, 2] and nodes[: len(survivors)] == survivors  # none lost or redone
    assert len({n["prompt_id"] for n in nodes}) == 3
    (rmsnorm,) = [c for c in children if c.data.tags["task"] == "rmsnorm_small"]
    spent = sum(n["wall_s"] for n in survivors)  # the rounds before the kill count
    assert rmsnorm.data.metrics["wall_s"] >= spent, (rmsnorm.data.metrics["wall_s"], spent)
    board = subprocess.run(
        [sys.executable, "-m", "forgebench.cli", "leaderboard"], cwd=tmp_path, env=user_env(), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert board.returncode == 0 and "unfinished" not in board.stdout, board.stdout + board.stderr


@pytest.mark.slow
def test_a_run_over_xdist_workers_is_one_suite_run_with_a_line_per_task_and_no_benchmark_warning(tmp_path):
    # A temporary folder of its own: left to pytest, this xdist controller would make pytest-of-<user>
    # private again while a test beside this one (`pytest tests/ -n 2`) has nobody pass through it.
    done = suite(tmp_path, "-n", "2", f"--basetemp={tmp_path / 'pytest'}", "--override", TASKS, "--rounds=1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout and "Benchmark fixture was not used" not in done.stdout
    # The controller writes each finished task's line (the workers' terminals are not shown).
    for task in ("rmsnorm_small", "silu_and_mul_small"):
        assert re.search(rf"\[gw[01]\] {task}: round 1/1, last correct .*: passed$", done.stdout, re.M), done.stdout
    assert "disabled because xdist" not in done.stdout + done.stderr
    (parent,) = _runs(tmp_path / "mlflow.db", "suite")
    assert parent.info.status == "FINISHED"
    children = _runs(tmp_path / "mlflow.db", "task")
    assert sorted(r.data.tags["task"] for r in children) == ["rmsnorm_small", "silu_and_mul_small"]
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent.info.run_id}


def test_a_captured_task_run_records_its_share_and_a_fused_one_its_members(tmp_path):
    from harness.agents.base import AgentOutcome
    from harness.agents.tree import SearchTree
    from harness.record import Recorder
    from harness.tasks import select

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    recorder = Recorder(uri, "forgebench")
    parent = recorder.start_suite({"agent": "oneshot", "model.label": "m", "run_dir": str(tmp_path)}, {})
    captured = select("resnet50")
    fused, single = next(t for t in captured if t.fused), next(t for t in captured if not t.fused)
    runs = {}
    for task in (fused, single):
        outcome = AgentOutcome(None, "rounds", SearchTree(tmp_path / task.id / "tree.jsonl"))
        runs[task.id] = mlflow_client(uri).get_run(recorder.record_task(parent, task, outcome, tmp_path, 1.0))
    # What the leaderboard's prediction reads (leaderboard/predicted.py): the share, and a fused
    # task's ATen calls beside a single-call task's operator.
    assert runs[fused.id].data.metrics["time_share"] == fused.time_share > 0
    assert runs[fused.id].data.tags["members"] == ",".join(fused.members)
    assert runs[fused.id].data.tags["members"].startswith("aten.")
    assert runs[single.id].data.tags["operator"] == single.operator and "members" not in runs[single.id].data.tags
    assert runs[single.id].data.metrics["time_share"] == single.time_share > 0
