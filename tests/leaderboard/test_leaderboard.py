"""`forgebench leaderboard` and `forgebench compare` over a real MLflow store holding runs laid out
as docs/records.md says the suite records them."""

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from forgebench.cli import main
from harness.errors import ForgeBenchError
from harness.record import mlflow_client
from leaderboard import stats
from leaderboard.table import resolve_run
from tests.test_suite import forgebench

# Two task runs of a gpu-offline suite run on the H200 (mcts, offline model, eager and compile baselines).
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
# Two task runs of the H200 gpu-offline suite with every library baseline (docs/results.md): Liger is
# the best baseline of one, torch.compile of the other.
H200_EXPERT_TASKS = {
    "rmsnorm_bf16_qwen": {
        "correct": 1.0, "time_ms": 0.0657, "eager_ms": 0.8592, "compile_ms": 0.0744, "liger_ms": 0.0657,
        "flashinfer_ms": 0.0874, "speedup_vs_eager": 13.08, "speedup_vs_compile": 1.132, "speedup_vs_liger": 1.0,
        "speedup_vs_flashinfer": 1.330, "speedup_vs_best": 1.0, "best_baseline": "liger",
    },
    "sd35_fused8_to_copy_mul_2x24x4096x64_5b18c8": {
        "correct": 1.0, "time_ms": 0.0144, "eager_ms": 0.2562, "compile_ms": 0.0155, "liger_ms": 0.0521,
        "flashinfer_ms": 0.2414, "speedup_vs_eager": 17.79, "speedup_vs_compile": 1.076, "speedup_vs_liger": 3.618,
        "speedup_vs_flashinfer": 16.76, "speedup_vs_best": 1.076, "best_baseline": "compile",
    },
}  # fmt: skip


def _record(store: Path, tasks: dict[str, dict[str, float]]) -> None:
    """A suite run as the suite recorded it before task sets, labels and hashes (a reader must still take it)."""
    client = mlflow_client(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("forgebench") or client.get_experiment(
        client.create_experiment("forgebench")
    )
    tags = {"agent": "mcts", "model": "offline", "platform": "triton", "suite": "gpu-offline"}
    parent = client.create_run(experiment.experiment_id, tags={**tags, "forgebench.kind": "suite"})
    for task, metrics in tasks.items():
        metrics = dict(metrics)
        best = {"best_baseline": metrics.pop("best_baseline")} if "best_baseline" in metrics else {}
        run = client.create_run(
            experiment.experiment_id,
            run_name=task,
            tags={**tags, "mlflow.parentRunId": parent.info.run_id, "forgebench.kind": "task", "task": task,
                  "stop_reason": "rounds", **best},
        )  # fmt: skip
        for key, value in metrics.items():
            client.log_metric(run.info.run_id, key, value)
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent.info.run_id)


def _kernel(speedup: float | None, time_ms: float = 1.0, spread: tuple[float, float] | None = None, cost=0.1):
    """A task run's final metrics: correct with `speedup` over eager, or incorrect when None."""
    metrics = {"correct": 0.0, "cost_usd": cost, "tokens_in": 100, "tokens_out": 50, "llm_calls": 2, "wall_s": 3}
    if speedup is not None:
        metrics |= {"correct": 1.0, "speedup_vs_eager": speedup, "time_ms": time_ms, "eager_ms": speedup * time_ms}
    if speedup is not None and spread:
        metrics |= {"time_p20_ms": spread[0], "time_p80_ms": spread[1]}
    return metrics


def _suite_run(
    client, experiment_id, day: str, task_set: str, tasks: dict, task_count=None, finished=True, **tags
) -> str:
    """A suite run with docs/records.md's tags, started on `day` (UTC), ended unless not `finished` (a
    run killed before it ended stays RUNNING); its tasks' hashes are `<task>-h` unless a task's metrics
    name one under "task_hash"."""
    start = int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() * 1000)
    tags = {"platform": "triton", "device": "NVIDIA H200", "suite": task_set.split("@")[0], **tags}
    tags |= {"task_set": task_set, "model.label": tags.get("model.label", tags["model"])}
    parent = client.create_run(
        experiment_id,
        start_time=start,
        tags={**tags, "forgebench.kind": "suite", "task_count": str(task_count or len(tasks))},
    ).info.run_id
    for i, (task, metrics) in enumerate(tasks.items()):
        metrics = dict(metrics)
        task_tags = {"task": task, "task_hash": metrics.pop("task_hash", f"{task}-h"), "stop_reason": "rounds"}
        run = client.create_run(
            experiment_id,
            start_time=start + i,
            tags={**tags, **task_tags, "forgebench.kind": "task", "mlflow.parentRunId": parent},
        ).info.run_id
        for key, value in metrics.items():
            client.log_metric(run, key, value)
    if finished:
        client.set_terminated(parent)
    return parent


KB, KB_RECAPTURED, GPU = "kb@aaaaaaaaaaaa", "kb@cccccccccccc", "gpu@bbbbbbbbbbbb"
# Against A: t1 tied within the spread, t2 won outside it, t3 won on correctness (only B solved it),
# t4 tied within 5% (no spread recorded), t5 lost on correctness (only A solved it).
A_TASKS = {
    "t1": _kernel(2.0, 1.0, (0.95, 1.05)),
    "t2": _kernel(1.2, 1.0, (0.98, 1.02)),
    "t3": _kernel(None),
    "t4": _kernel(1.5, 2.0),
    "t5": _kernel(3.0, 1.0, (0.9, 1.1)),
}
B_TASKS = {
    "t1": _kernel(2.04, 0.98, (0.93, 1.02), cost=0.3),
    "t2": _kernel(2.4, 0.5, (0.48, 0.52), cost=0.3),
    "t3": _kernel(1.5, 1.0, (0.95, 1.05), cost=0.3),
    "t4": _kernel(1.53, 1.96, cost=0.3),
    "t5": _kernel(None, cost=0.3),
}


@pytest.fixture(scope="module")
def board(tmp_path_factory) -> dict[str, str]:
    """One store for the reading tests: run ids by name, and the store's URI under "uri"."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('board') / 'mlflow.db'}"
    client = mlflow_client(uri)
    experiment = client.create_experiment("forgebench")
    runs = {
        "slow": ("2026-11-01", KB, {t: _kernel(0.07) for t in A_TASKS}, "mcts", "openai/slow-coder", "slow-provider"),
        "none": ("2026-11-02", KB, {t: _kernel(None) for t in A_TASKS}, "mcts", "openai/none-coder", "none-provider"),
        "a": ("2026-12-01", KB, A_TASKS, "oneshot", "offline", "offline"),
        "b_old": ("2026-10-01", KB, {t: _kernel(10.0) for t in A_TASKS}, "mcts", "openai/gpt-b", "gpt-b"),
        "b": ("2026-12-03", KB, B_TASKS, "mcts", "openai/gpt-b", "gpt-b"),
        "recaptured": (
            "2026-12-04",
            KB_RECAPTURED,
            {"t1": {**_kernel(2.0), "task_hash": "t1-new"}, "t2": _kernel(1.2)},
            "oneshot",
            "offline",
            "offline",
        ),
    }
    ids = {
        name: _suite_run(client, experiment, day, task_set, tasks, agent=agent, model=model, **{"model.label": label})
        for name, (day, task_set, tasks, agent, model, label) in runs.items()
    }
    # Killed after its first task of two: the unrecorded one counts as failed.
    ids["gpu"] = _suite_run(
        client, experiment, "2026-12-02", GPU, {"g1": _kernel(5.0)}, task_count=2, agent="mcts", model="openai/gpt-b",
        platform="cuda", **{"model.label": "gpt-b"},
    )  # fmt: skip
    return {**ids, "uri": uri}


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _leaderboard_json(capsys, board, *args: str) -> dict[str, pd.DataFrame]:
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"], "--format", "json", *args)
    assert code == 0, err
    return {table["task_set"]: pd.DataFrame(table["rows"]) for table in json.loads(out)}


def _row(board: str, first_cell: str) -> list[str]:
    line = next(line for line in board.splitlines() if line.startswith(f"| {first_cell}"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def _per_task(capsys, uri: str, *tasks: str) -> tuple[list[str], list[list[str]]]:
    """`leaderboard --per-task`'s header and the named tasks' rows, cell by cell."""
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", uri, "--per-task")
    assert code == 0, err
    cells = lambda task: [c for c in next(r for r in map(str.split, out.splitlines()) if task in r) if c != "|"]
    return _row(out, "run"), [cells(task) for task in tasks]


def _sections(markdown: str) -> dict[str, str]:
    parts = markdown.split("### task set ")[1:]
    return {part.split(" ", 1)[0]: part for part in parts}


def test_each_task_set_is_ranked_in_its_own_table(capsys, board):
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"])
    assert code == 0, err
    sections = _sections(out)
    assert list(sections) == [GPU, KB, KB_RECAPTURED]
    assert board["gpu"][:8] in sections[GPU] and board["gpu"][:8] not in sections[KB]
    ranked = [line.split("|")[-2].strip() for line in sections[KB].splitlines() if line.startswith("| mcts")]
    assert ranked[0] == board["b_old"][:8]  # 10x on every task leads the set
    assert "(5 suite runs)" in sections[KB].splitlines()[0]


def test_a_provider_whose_kernels_are_all_slower_is_told_apart_from_one_that_found_nothing(capsys, board):
    kb = _leaderboard_json(capsys, board)[KB].set_index("model")
    assert kb.loc["slow-provider", "geomean_correct"] == pytest.approx(0.07)
    assert kb.loc["slow-provider", "geomean_speedup"] == 1.0 and kb.loc["slow-provider", "solved"] == "5/5"
    assert pd.isna(kb.loc["none-provider", "geomean_correct"])
    assert kb.loc["none-provider", "geomean_speedup"] == 1.0 and kb.loc["none-provider", "solved"] == "0/5"
    code, out, _ = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"], "--model", "none-provider")
    assert code == 0
    header, row = _row(out, "agent"), _row(out, "mcts")
    assert row[header.index("geomean_correct")] == "" and row[header.index("geomean_speedup")] == "1"


def test_fast_p_counts_correct_kernels_strictly_faster_than_p_over_all_tasks(capsys, board):
    a = _leaderboard_json(capsys, board, "--agent", "oneshot", "--suite", "kb")[KB].iloc[0]
    # Correct: 2.0, 1.2, 1.5, 3.0 of five tasks; 1.5 is not faster than 1.5x, nor 2.0 than 2x.
    assert (a["fast_0"], a["fast_1"], a["fast_1.5"], a["fast_2"]) == (0.8, 0.8, 0.4, 0.2)
    assert a["geomean_speedup"] == pytest.approx((2.0 * 1.2 * 1.5 * 3.0) ** (1 / 5))
    assert a["geomean_correct"] == pytest.approx((2.0 * 1.2 * 1.5 * 3.0) ** (1 / 4))
    assert (a["tokens"], a["llm_calls"], a["cost_per_task"]) == (750, 10, pytest.approx(0.1))
    assert stats.fast_p([0.5, 1.0, 1.01, 9.0], [True, True, True, False], 1) == 0.25


def test_tasks_a_run_selected_but_never_recorded_count_as_failed(capsys, board):
    gpu = _leaderboard_json(capsys, board, "--platform", "cuda")[GPU].iloc[0]
    assert (gpu["solved"], gpu["fast_0"]) == ("1/2", 0.5)
    assert gpu["geomean_speedup"] == pytest.approx(5.0**0.5) and gpu["geomean_correct"] == pytest.approx(5.0)


def test_the_bootstrap_interval_holds_the_geomean_and_is_the_same_every_time(capsys, board):
    values = [2.0, 1.2, 1.0, 1.5, 3.0]
    low, high = stats.bootstrap_geomean(values)
    assert low < stats.geomean(values) < high
    assert stats.bootstrap_geomean(values) == (low, high) != stats.bootstrap_geomean(values, seed=1)
    assert stats.bootstrap_geomean([1.0, 1.0]) == (1.0, 1.0)
    a = _leaderboard_json(capsys, board, "--agent", "oneshot", "--suite", "kb")[KB].iloc[0]
    assert (a["ci95_low"], a["ci95_high"]) == (pytest.approx(low), pytest.approx(high))
    again = _leaderboard_json(capsys, board, "--agent", "oneshot", "--suite", "kb")[KB].iloc[0]
    assert (again["ci95_low"], again["ci95_high"]) == (a["ci95_low"], a["ci95_high"])


@pytest.mark.parametrize(
    "filters, runs",
    [
        (["--agent", "oneshot"], {"a", "recaptured"}),
        (["--model", "slow-provider"], {"slow"}),
        (["--model", "openai/slow-coder"], {"slow"}),
        (["--platform", "cuda"], {"gpu"}),
        (["--suite", "gpu"], {"gpu"}),
        (["--suite", KB_RECAPTURED], {"recaptured"}),
        (["--since", "2026-12-02"], {"gpu", "b", "recaptured"}),
        (["--since", "2026-12-03T01:00+02:00", "--agent", "mcts"], {"b"}),
    ],
)
def test_filters_keep_the_runs_they_name(capsys, board, filters, runs):
    tables = _leaderboard_json(capsys, board, *filters)
    kept = {run for table in tables.values() for run in table["parent_run_id"]}
    assert kept == {board[name] for name in runs}


@pytest.mark.parametrize(
    "filters, culprit",
    [
        (["--since", "last tuesday"], "--since 'last tuesday' is not a date"),
        (["--agent", "nosuch"], "--agent 'nosuch' matches no suite run; the runs selected have mcts, oneshot."),
        (["--since", "2027-01-01"], "the latest selected started 2026-12-04 00:00 UTC"),
        (["--run", "abc"], "run id 'abc' is too short"),
        (["--experiment", "nosuch"], "--experiment nosuch: the store"),
    ],
)
def test_a_filter_that_matches_nothing_says_what_there_is(capsys, board, filters, culprit):
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"], *filters)
    assert code == 2 and out == ""
    assert culprit in err and err.count("\n") == 1


def test_json_from_the_command_line_parses(board, tmp_path):
    done = forgebench(tmp_path, "leaderboard", "--tracking-uri", board["uri"], "--format", "json", "--suite", "gpu")
    assert done.returncode == 0, done.stderr
    (table,) = json.loads(done.stdout)
    assert table["task_set"] == GPU and table["rows"][0]["parent_run_id"] == board["gpu"]
    assert table["rows"][0]["geomean_vs_best"] is None  # NaN as null
    assert "geomean_vs_compile" not in table["rows"][0]  # a column per baseline the records hold: none timed compile


def test_csv_is_one_table_with_a_task_set_column(capsys, board):
    code, out, _ = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"], "--format", "csv")
    frame = pd.read_csv(io.StringIO(out))
    assert code == 0 and frame.columns[0] == "task_set"
    assert frame.groupby("task_set").size().to_dict() == {GPU: 1, KB: 5, KB_RECAPTURED: 1}


def test_html_is_a_page_with_every_run(capsys, board, tmp_path):
    page = tmp_path / "board.html"
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"], "--format", "html", "--out", str(page))
    assert code == 0 and out == f"wrote {page}\n", err
    html = page.read_text()
    assert html.startswith("<!doctype html>") and html.count("<table") == 3
    assert all(board[name][:8] in html for name in ("slow", "none", "a", "b", "b_old", "recaptured", "gpu"))
    bad = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"], "--out", str(tmp_path / "nope" / "b.md"))
    assert bad[0] == 2 and "the folder" in bad[2]


def test_per_task_rows_name_their_run_agent_and_model(capsys, board):
    code, out, _ = _cli(capsys, "leaderboard", "--tracking-uri", board["uri"], "--per-task", "--suite", KB)
    assert code == 0
    header = _row(out, "run")
    rows = [_row(out, board[name][:8]) for name in ("a", "b")]
    assert header[:4] == ["run", "agent", "model", "task"]
    assert [row[:3] for row in rows] == [[board["a"][:8], "oneshot", "offline"], [board["b"][:8], "mcts", "gpt-b"]]
    assert out.count(board["a"][:8]) == 5


def _compare_json(capsys, board, *args: str) -> dict:
    code, out, err = _cli(capsys, "compare", "--tracking-uri", board["uri"], "--format", "json", *args)
    assert code == 0, err
    return json.loads(out)


def test_compare_counts_wins_losses_and_ties_within_the_timing_spread(capsys, board):
    (result,) = _compare_json(capsys, board, board["a"][:6], board["b"][:6])["comparisons"]
    verdicts = {task["task"]: (task["verdict"], task["rule"]) for task in result["tasks"]}
    assert verdicts == {
        "t1": ("tie", "spread"),
        "t2": ("win", "spread"),
        "t3": ("win", "correctness"),
        "t4": ("tie", "within 5%"),
        "t5": ("loss", "correctness"),
    }
    assert (result["wins"], result["losses"], result["ties"]) == (2, 1, 2)
    assert result["tie_rules"] == {"spread": 1, "within 5%": 1}
    assert (result["solved_only_by_b"], result["solved_only_by_a"]) == (["t3"], ["t5"])
    assert result["cost_ratio"] == pytest.approx(3.0)
    # Ties count 1; t2 the kernels' times (1.0 ms against 0.5); t3 and t5 the guarded speedups.
    expected = stats.geomean([1.0, 1.0 / 0.5, 1.5 / 1.0, 1.0, 1.0 / 3.0])
    assert result["geomean_ratio"] == pytest.approx(expected)
    assert result["ci95_low"] < expected < result["ci95_high"]
    assert (result["a"]["run_id"], result["b"]["run_id"]) == (board["a"], board["b"])


def test_compare_in_markdown_says_which_rule_tied(capsys, board):
    code, out, _ = _cli(capsys, "compare", "--tracking-uri", board["uri"], board["a"], board["b"])
    assert code == 0
    assert "5 tasks paired: B wins 2, loses 1, ties 2 (1 spread, 1 within 5%)" in out
    assert "solved only by B: t3; only by A: t5" in out


def test_compare_refuses_runs_of_different_task_sets_unless_told(capsys, board):
    code, _, err = _cli(capsys, "compare", "--tracking-uri", board["uri"], board["a"], board["recaptured"])
    assert code == 2 and "pass --any-set" in err
    (result,) = _compare_json(capsys, board, board["a"], board["recaptured"], "--any-set")["comparisons"]
    # t1 was recaptured (a new task_hash): never paired with the old t1.
    assert [task["task"] for task in result["tasks"]] == ["t2"]
    assert (result["attempted_only_by_a"], result["attempted_only_by_b"]) == (["t1", "t3", "t4", "t5"], ["t1"])


def test_compare_by_model_takes_each_models_latest_run_against_the_leader(capsys, board):
    found = _compare_json(capsys, board, "--by", "model", "--suite", "kb")
    assert "latest suite run of each model" in found["selection"]
    pairs = [(c["task_set"], c["a"]["run_id"], c["b"]["run_id"]) for c in found["comparisons"]]
    # Within KB the latest gpt-b run (b, not b_old) leads; the other sets have one model each.
    assert pairs == [(KB, board["b"], board[name]) for name in ("a", "slow", "none")]


def test_a_run_id_prefix_must_name_one_run():
    runs = pd.DataFrame({"parent_run_id": ["abcdef12", "abcdef34", "0123456789"]})
    assert resolve_run(runs, "012345") == "0123456789"
    with pytest.raises(ForgeBenchError, match="'abcdef' starts 2 suite runs' ids"):
        resolve_run(runs, "abcdef")
    with pytest.raises(ForgeBenchError, match="no suite run's id starts with 'ffffff'"):
        resolve_run(runs, "ffffff")


@pytest.mark.parametrize("command", [["leaderboard"], ["compare", "--by", "model"]])
def test_a_missing_store_is_an_error_and_stays_missing(capsys, tmp_path, command):
    store = tmp_path / "nope.db"
    code, _, err = _cli(capsys, *command, "--tracking-uri", f"sqlite:///{store}")
    assert code == 2 and "no MLflow store" in err and not store.exists()


def test_the_leaderboard_compares_with_torch_compile_where_the_run_timed_it(capsys, tmp_path):
    _record(tmp_path / "mlflow.db", H200_TASKS)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    header, (copy,) = _per_task(capsys, uri, "qwen35_copy_8x32x64x128_d3241c")
    assert copy[header.index("speedup_vs_compile")] == "13.3"
    assert copy[header.index("compile_ms")] == "0.0968"
    code, out, _ = _cli(capsys, "leaderboard", "--tracking-uri", uri)
    assert code == 0
    assert out.startswith("### task set gpu-offline (1 suite run)")  # named by its suite: no task_set tag
    header, row = _row(out, "agent"), _row(out, "mcts")
    assert float(row[header.index("geomean_vs_compile")]) == pytest.approx((13.26 * 1.00) ** 0.5, rel=5e-3)
    assert float(row[header.index("geomean_correct")]) == pytest.approx((19.05 * 1.53) ** 0.5, rel=5e-3)


def test_each_task_names_its_best_baseline_and_the_run_its_geomean_over_the_best(capsys, tmp_path):
    _record(tmp_path / "mlflow.db", H200_EXPERT_TASKS)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    header, (norm, qk) = _per_task(capsys, uri, "rmsnorm_bf16_qwen", "sd35_fused8_to_copy_mul_2x24x4096x64_5b18c8")
    assert (norm[header.index("best_baseline")], norm[header.index("speedup_vs_best")]) == ("liger", "1")
    assert norm[header.index("speedup_vs_flashinfer")] == "1.33"
    assert (qk[header.index("best_baseline")], qk[header.index("speedup_vs_liger")]) == ("compile", "3.62")
    code, out, _ = _cli(capsys, "leaderboard", "--tracking-uri", uri)
    assert code == 0
    header, row = _row(out, "agent"), _row(out, "mcts")
    # 13-18x over eager, but only 1.04x past the best each task had.
    assert float(row[header.index("geomean_vs_best")]) == pytest.approx((1.0 * 1.076) ** 0.5, rel=5e-3)


def test_a_run_without_a_compile_baseline_shows_no_compile_columns(capsys, tmp_path):
    eager_only = {
        task: {k: v for k, v in metrics.items() if not k.startswith(("compile", "speedup_vs_compile"))}
        for task, metrics in H200_TASKS.items()
    }
    _record(tmp_path / "mlflow.db", eager_only)
    for view in (["--per-task"], []):
        code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", *view)
        assert code == 0, err
        assert "compile" not in out and "nan" not in out


def test_a_store_without_runs_gives_an_empty_table_and_says_why(capsys, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_client(uri).create_experiment("forgebench")
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", uri, "--format", "json", "--per-task")
    assert (code, json.loads(out)) == (0, []) and "no ForgeBench runs" in err


def test_a_run_id_of_digits_alone_prints_as_text():
    import pandas as pd

    from leaderboard.table import render

    board = render(pd.DataFrame({"run": ["12345678", "abcdef12"], "speedup": [1.23456, 2.0]}), ["run", "speedup"])
    assert "| 12345678 |" in board and "e+07" not in board


def test_compare_headline_agrees_with_the_wins_when_eager_drifted_between_runs():
    """B's kernels are faster on 5 of 6 tasks (spreads apart) and tie on one, but A's run met a busy
    machine whose eager took twice as long, so A's speedups read higher: a headline of speedup
    ratios said B was 0.6x; read as the verdicts are, B gains on every task it won."""
    from leaderboard.compare import compare_runs

    rows = []
    for run, time_ms, eager_ms in (("a" * 32, 1.0, 10.0), ("b" * 32, 0.8, 5.0)):
        for i in range(6):
            t = 1.0 if i == 5 else time_ms
            rows.append(
                {
                    "parent_run_id": run,
                    "task": f"t{i}",
                    "task_hash": f"t{i}-h",
                    "correct": 1.0,
                    "speedup_vs_eager": eager_ms / t,
                    "time_ms": t,
                    "time_p20_ms": 0.98 * t,
                    "time_p80_ms": 1.02 * t,
                    "cost_usd": 0.1,
                    "agent": "mcts",
                    "model": "offline",
                    "device": "cpu",
                    "task_set": "smoke",
                }
            )
    comparison = compare_runs(pd.DataFrame(rows), "a" * 32, "b" * 32, resamples=200)
    assert (comparison.count("win"), comparison.count("loss"), comparison.count("tie")) == (5, 0, 1)
    assert comparison.geomean_ratio == pytest.approx(1.25 ** (5 / 6))


def test_a_killed_suite_run_is_shown_unfinished(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri)
    experiment = client.create_experiment("forgebench")
    tasks = {"t1": _kernel(2.0), "t2": _kernel(None), "t3": _kernel(1.5)}
    _suite_run(client, experiment, "2026-12-01", KB, tasks, task_count=6, finished=False, agent="mcts", model="m")
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", uri)
    assert code == 0, err
    assert "2/6 unfinished" in out, out


def test_the_e2e_heading_counts_the_e2e_runs_it_shows(tmp_path, capsys):
    # Two e2e runs of one model on the kernels of one suite run: two rows, two e2e runs.
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri)
    experiment = client.create_experiment("forgebench")
    suite = _suite_run(client, experiment, "2026-12-01", KB, {"t1": _kernel(2.0)}, agent="mcts", model="m")
    for speedup in (1.1, 1.2):
        tags = {"forgebench.kind": "e2e", "model": "resnet50", "source_run": suite, "device": "cpu"}
        run = client.create_run(experiment, tags=tags).info.run_id
        client.log_metric(run, "e2e_speedup_vs_eager", speedup)
        client.set_terminated(run)
    code, out, err = _cli(capsys, "leaderboard", "--tracking-uri", uri, "--e2e")
    assert code == 0, err
    (heading,) = [line for line in out.splitlines() if line.startswith("###")]
    assert heading == "### e2e: resnet50 (2 e2e runs)", out
    assert len([line for line in out.splitlines() if line.startswith("| resnet50")]) == 2, out
