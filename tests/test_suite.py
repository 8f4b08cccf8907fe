"""The main job as a user runs it: `pytest suite/`, then `forgebench leaderboard` in the same folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.record import mlflow_client

REPO = Path(__file__).resolve().parents[1]
RMSNORM_KERNEL = REPO / "tests" / "candidates" / "rmsnorm_cpp.py"
# rmsnorm_small and silu_and_mul_small: the tests that run whole suites for what a run records, resumes
# or shows take these, a few hundred kB each (tests/tasks/README.md); the evaluator's tests take real tasks.
SMALL_TASKS = REPO / "tests" / "tasks"
RMSNORM_SMALL, SILU_SMALL = SMALL_TASKS / "rmsnorm_small", SMALL_TASKS / "silu_and_mul_small"
SMALL_PAIR = f"[{RMSNORM_SMALL},{SILU_SMALL}]"  # both, as --tasks= and the tasks= override take a list


def user_env(**env: str) -> dict[str, str]:
    """This environment less any API key, MLflow store and the marks of the pytest running this test,
    plus env. Under `pytest tests/ -n N`, PYTEST_XDIST_WORKER would make the suite's own pytest take
    itself for an xdist worker: pytest-benchmark then turns itself off and writes no --benchmark-json."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k != "MLFLOW_TRACKING_URI" and not _set_by_outer_pytest(k)
    }
    return {**environment, **env}


def _set_by_outer_pytest(name: str) -> bool:
    """A variable pytest or xdist sets in a test's own process; a user's shell has none of them."""
    return name.startswith("PYTEST_XDIST_") or name == "PYTEST_CURRENT_TEST"


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    cwd.chmod(0o711)  # workers run as nobody under root and must pass through
    return subprocess.run(args, cwd=cwd, env=user_env(**env), capture_output=True, text=True, timeout=900)


def suite_command(*options: str) -> list[str]:
    pytest_suite = [sys.executable, "-m", "pytest", str(REPO / "suite"), "-p", "no:cacheprovider"]
    return [*pytest_suite, "--override", "evaluate.budget_ms=50", *options]


def suite(cwd: Path, *options: str, **env: str) -> subprocess.CompletedProcess:
    return run(suite_command(*options), cwd, **env)


def forgebench(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "forgebench.cli", *args], cwd)


@pytest.mark.slow
def test_mcts_offline_run_prints_a_leaderboard_that_mlflow_reproduces(tmp_path):
    done = suite(tmp_path, "--agent=mcts", f"--tasks={RMSNORM_SMALL}", "--rounds=3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert "ForgeBench leaderboard (this run)" in done.stdout
    assert (tmp_path / "mlflow.db").is_file()
    trees = list(tmp_path.glob("runs/*/*/tasks/rmsnorm_small/tree.jsonl"))
    assert len(trees) == 1 and len(trees[0].read_text().splitlines()) == 3

    summary_row = next(line for line in done.stdout.splitlines() if line.startswith("| mcts"))
    board = forgebench(tmp_path, "leaderboard")
    assert board.returncode == 0, board.stderr
    assert summary_row in board.stdout.splitlines()

    from harness.record import mlflow_client

    client = mlflow_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("forgebench")
    (task_run,) = client.search_runs([experiment.experiment_id], "tags.task = 'rmsnorm_small'")
    metrics = task_run.data.metrics
    assert metrics["time_ms"] > 0 and metrics["eager_ms"] > 0
    assert metrics["host_ms"] > 0 and metrics["eager_host_ms"] > 0  # a reader can tell host-bound times
    assert metrics["eager_setup_s"] >= 0 and metrics["speedup_vs_best"] > 0  # build time apart; the best baseline
    assert task_run.data.tags["best_baseline"] in ("eager", "compile", "compile_max_autotune")


def test_unknown_agent_lists_the_agents(tmp_path):
    done = suite(tmp_path, "--agent=nosuch")
    assert done.returncode != 0
    assert "unknown agent 'nosuch'; choose one of analyst, bestofn, mcts, oneshot, refine" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_missing_api_key_stops_at_start(tmp_path):
    done = suite(tmp_path, "--model=openai/gpt-4o")
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "needs OPENAI_API_KEY" in output
    assert "Traceback" not in output and not (tmp_path / "runs").exists()


def test_a_task_without_a_correct_kernel_fails_with_the_reason(tmp_path):
    # Cross-entropy: a loss the offline model has no kernel for (its aten calls end in a tuple's item).
    loss = REPO.parent / "shared" / "data" / "kernelbench" / "level1" / "95_CrossEntropyLoss.py"
    done = suite(tmp_path, "--agent=oneshot", f"--tasks={loss}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout
    assert "no correct kernel for 95_CrossEntropyLoss" in done.stdout
    # A set given as a path goes by the file's name on the leaderboard, the path kept in `suite`.
    client = mlflow_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("forgebench").experiment_id
    (run,) = client.search_runs([experiment], "tags.`forgebench.kind` = 'suite'")
    assert run.data.tags["task_set"].startswith(f"{loss.name}@") and run.data.tags["suite"] == str(loss)


@pytest.mark.slow
def test_an_unreachable_provider_is_one_sentence_a_call_and_stops_the_run(tmp_path):
    """A closed port with a bogus key: each failed call is one line, and the third in a row stops the
    run with a sentence (it printed some 2,000 lines of litellm's tracebacks a task and went on)."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = suite(
        tmp_path, "--model=openai/gpt-4o", "--agent=refine", "--rounds=2", f"--tasks={SMALL_TASKS}",
        "--override", f"model.api_base=http://127.0.0.1:{port}/v1", "--override", "model.num_retries=0",
        OPENAI_API_KEY="sk-not-a-real-key",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-3000:]  # pytest's "interrupted"
    assert output.count(f"a model call failed (openai/gpt-4o at 127.0.0.1:{port}: ") >= 2, output[-3000:]
    assert "3 model calls in a row failed" in output and "the run stops here" in output, output[-3000:]
    assert "Traceback" not in output and len(output.splitlines()) < 80, output[-3000:]


@pytest.mark.slow
def test_the_readmes_glob_skips_the_gpu_sized_task_on_a_cpu_with_its_reason(tmp_path):
    done = suite(tmp_path, "--agent=oneshot", "--tasks=softmax*", "--rounds=1", "-rs")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "1 passed, 1 skipped" in output, output[-3000:]
    assert "task 'softmax_fp16_attn' is sized for a GPU (tag gpu-sized)" in output, output[-3000:]
