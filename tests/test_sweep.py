"""`forgebench run`: Hydra's entry point; a sweep over agents through the joblib launcher records
every job into one MLflow store, and the cluster launchers' example configs compose."""

import sys

import pytest

from harness.record import mlflow_client
from tests.test_suite import RMSNORM_SMALL, run


def forgebench_run(cwd, *args):
    return run([sys.executable, "-m", "forgebench.cli", "run", *args], cwd)


@pytest.mark.slow
def test_a_joblib_sweep_of_two_agents_by_two_labels_records_four_suite_runs_in_one_store_and_four_logs(tmp_path):
    done = forgebench_run(
        tmp_path, "-m", "agent=oneshot,refine", "model.label=alpha,beta", f"tasks={RMSNORM_SMALL}", "budget.rounds=1",
        "evaluate.budget_ms=50", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    client = mlflow_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("forgebench")
    parents = client.search_runs([experiment.experiment_id], "tags.`forgebench.kind` = 'suite'")
    jobs = sorted((p.data.tags["agent"], p.data.tags["model.label"]) for p in parents)
    assert jobs == [("oneshot", "alpha"), ("oneshot", "beta"), ("refine", "alpha"), ("refine", "beta")]
    assert all(p.info.status == "FINISHED" for p in parents)
    children = client.search_runs([experiment.experiment_id], "tags.`forgebench.kind` = 'task'")
    correct = {c.data.tags["mlflow.parentRunId"]: c.data.metrics["correct"] for c in children}
    assert sorted(correct) == sorted(p.info.run_id for p in parents) and set(correct.values()) == {1.0}
    assert len(list(tmp_path.glob("runs/sweeps/*/[0-3]/.hydra/overrides.yaml"))) == 4
    # Each job's log holds its suite's output, which was also shown as it came.
    logs = sorted(tmp_path.glob("runs/sweeps/*/[0-3]/sweep.log"))
    assert len(logs) == 4
    for log in logs:
        kept = log.read_text()
        assert "rmsnorm_small: round 1/1, last correct" in kept and "1 passed" in kept, kept[-3000:]
    assert done.stdout.count("1 passed") == 4, done.stdout[-3000:]
    board = run([sys.executable, "-m", "forgebench.cli", "leaderboard"], tmp_path)
    assert len([line for line in board.stdout.splitlines() if line.startswith(("| oneshot", "| refine"))]) == 4


def test_a_sweep_job_with_a_bad_value_stops_with_the_suites_sentence(tmp_path):
    done = forgebench_run(tmp_path, "-m", "tasks=rmsnorm_qwen", "evaluate.timeout_s=abc")
    assert done.returncode != 0
    assert "evaluate.timeout_s" in done.stdout + done.stderr


@pytest.mark.parametrize("args", [["agent=mtcs"], ["-m", "agent=oneshot,mtcs", "tasks=rmsnorm_qwen"]])
def test_a_misspelt_entry_is_one_sentence_and_exit_2_before_any_job(tmp_path, args):
    done = forgebench_run(tmp_path, *args)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().count("\n") == 0 and "agent/mtcs" in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("launcher, plugin", [("slurm_h200", "SlurmLauncher"), ("joblib", "JoblibLauncher")])
def test_the_launcher_configs_compose(tmp_path, launcher, plugin):
    done = forgebench_run(tmp_path, "--cfg", "hydra", f"hydra/launcher={launcher}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert plugin in done.stdout
    assert not (tmp_path / "mlflow.db").exists()  # printing the config writes no store
