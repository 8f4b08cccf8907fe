"""`forgebench leaderboard` over a real MLflow store holding runs laid out as the suite records them."""

from pathlib import Path

import pytest

from harness.record import mlflow_client
from tests.test_suite import forgebench

# Two task runs of the fifth session's H200 suite (docs/data/suite_mcts_gpu_offline_h200_session5.json).
H200_TASKS = {
    "qwen35_copy_8x32x64x128_d3241c": {
        "correct": 1.0, "time_ms": 0.0073, "host_ms": 0.0325, "eager_ms": 0.1390, "eager_host_ms": 0.0331,
        "compile_ms": 0.0968, "compile_host_ms": 0.1134, "speedup_vs_eager": 19.05, "speedup_vs_compile": 13.26,
        "sol_fraction": 0.8123, "rounds": 8, "llm_calls": 8, "cost_usd": 0.0,
    },
    "gemma4_mul_8x2048x5376_ccdb28": {
        "correct": 1.0, "time_ms": 0.1669, "host_ms": 0.0303, "eager_ms": 0.2548, "eager_host_ms": 0.0300,
        "compile_ms": 0.1663, "compile_host_ms": 0.0849, "speedup_vs_eager": 1.53, "speedup_vs_compile": 1.00,
        "sol_fraction": 0.9942, "rounds": 6, "llm_calls": 8, "cost_usd": 0.0,
    },
}  # fmt: skip


def _record(store: Path, tasks: dict[str, dict[str, float]]) -> None:
    client = mlflow_client(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("forgebench") or client.get_experiment(
        client.create_experiment("forgebench")
    )
    tags = {"agent": "mcts", "model": "offline", "platform": "triton", "suite": "gpu-offline"}
    parent = client.create_run(experiment.experiment_id, tags={**tags, "forgebench.kind": "suite"})
    for task, metrics in tasks.items():
        run = client.create_run(
            experiment.experiment_id,
            run_name=task,
            tags={**tags, "mlflow.parentRunId": parent.info.run_id, "forgebench.kind": "task", "task": task,
                  "stop_reason": "rounds"},
        )  # fmt: skip
        for key, value in metrics.items():
            client.log_metric(run.info.run_id, key, value)
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent.info.run_id)


def _row(board: str, first_cell: str) -> list[str]:
    line = next(line for line in board.splitlines() if line.startswith(f"| {first_cell}"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_leaderboard_compares_with_torch_compile_where_the_run_timed_it(tmp_path):
    _record(tmp_path / "mlflow.db", H200_TASKS)
    board = forgebench(tmp_path, "leaderboard", "--per-task")
    assert board.returncode == 0, board.stderr
    header, copy = _row(board.stdout, "task"), _row(board.stdout, "qwen35_copy")
    assert copy[header.index("speedup_vs_compile")] == "13.3"
    assert copy[header.index("compile_ms")] == "0.0968"
    summary = forgebench(tmp_path, "leaderboard")
    header, row = _row(summary.stdout, "agent"), _row(summary.stdout, "mcts")
    assert float(row[header.index("geomean_vs_compile")]) == pytest.approx((13.26 * 1.00) ** 0.5, rel=5e-3)
    assert float(row[header.index("geomean_correct")]) == pytest.approx((19.05 * 1.53) ** 0.5, rel=5e-3)


def test_a_run_without_a_compile_baseline_shows_no_compile_columns(tmp_path):
    eager_only = {
        task: {k: v for k, v in metrics.items() if not k.startswith(("compile", "speedup_vs_compile"))}
        for task, metrics in H200_TASKS.items()
    }
    _record(tmp_path / "mlflow.db", eager_only)
    for view in (["--per-task"], []):
        board = forgebench(tmp_path, "leaderboard", *view)
        assert board.returncode == 0, board.stderr
        assert "compile" not in board.stdout and "nan" not in board.stdout
