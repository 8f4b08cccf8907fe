"""The ForgeBench pytest plugin: compose the config from options, one test per task."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from forgebench.cli import skip_the_last_collections
from harness.errors import ForgeBenchError

_RUN = pytest.StashKey["object"]()
_TASKS = pytest.StashKey["list"]()
# The user property in which an xdist worker hands the controller a finished task's progress line.
_TASK_LINE = "forgebench.progress"


def _default_platform() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("forgebench")
    group.addoption("--agent", default=None, help="agent strategy: an entry of conf/agent/ (default: mcts)")
    group.addoption(
        "--model",
        default=None,
        help="an entry of conf/model/ or any litellm model string such as openai/gpt-4o (default: offline)",
    )
    group.addoption("--platform", default=None, help="cpu, cuda or triton (default: cuda where a GPU is present)")
    group.addoption(
        "--tasks",
        default=None,
        help="a suite name (conf/suite/), a task id pattern, or a path to KernelBench-format files",
    )
    group.addoption("--rounds", type=int, default=None, help="candidates evaluated per task (budget.rounds)")
    group.addoption(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a raw Hydra override, e.g. --override evaluate.timeout_s=60 (repeatable)",
    )


def _compose(config: pytest.Config):
    from harness.config import compose, group_options

    tasks = config.getoption("--tasks")
    suite = tasks if tasks in group_options("suite") else None
    overrides = list(config.getoption("--override"))
    if tasks is not None and suite is None:
        overrides.append(f"tasks={tasks}")
    if config.getoption("--rounds") is not None:
        overrides.append(f"budget.rounds={config.getoption('--rounds')}")
    return compose(
        agent=config.getoption("--agent"),
        model=config.getoption("--model"),
        platform=config.getoption("--platform") or _default_platform(),
        suite=suite,
        overrides=overrides,
    )


def pytest_configure(config: pytest.Config) -> None:
    """Every check at start, before any task runs: a bad option, value, model, platform, task
    selection or store stops the run here with one sentence (pytest's usage error, exit status 4)."""
    from harness.config import task_patterns
    from harness.session import SuiteRun
    from harness.tasks import select

    if config.option.help:
        return
    if _distributed(config):
        # pytest-benchmark turns itself off under xdist and warns of it at the end; its documented
        # --benchmark-disable says so up front (the records come from the evaluator, not from it).
        config.option.benchmark_disable = True
    if config.getoption("dist", "no") != "no" and not config.option.collectonly:
        config.pluginmanager.register(_WorkerLines(config), "forgebench-worker-lines")
    handed = getattr(config, "workerinput", {}).get("forgebench")
    try:
        if config.option.collectonly:
            cfg = _compose(config)
            config.stash[_TASKS] = select(task_patterns(cfg), keep_broken=True)
            return
        if handed:  # an xdist worker: its own device, the controller's suite run and run folder
            _pin_worker(config.workerinput["workerid"], handed)
            run = SuiteRun(_compose(config), Path(handed["run_dir"]), handed["parent_run_id"])
        else:
            run = SuiteRun(_compose(config))
    except ForgeBenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_RUN] = run
    config.stash[_TASKS] = run.tasks()


def _distributed(config: pytest.Config) -> bool:
    """An xdist controller (`-n N`) or one of its workers."""
    return hasattr(config, "workerinput") or config.getoption("dist", "no") != "no"


class _WorkerLines:
    """The controller's live line per finished task under xdist, where the workers' own terminals
    are not shown: the worker's last progress line for the task, which worker ran it, its outcome."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(trylast=True)  # after pytest's own status letter for the test
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or report.when == "teardown" or (report.when == "setup" and report.passed):
            return
        worker = getattr(report, "node", None)
        where = f"[{worker.gateway.id}] " if worker is not None else ""
        line = dict(report.user_properties).get(_TASK_LINE) or report.head_line
        reporter.write_line(f"{where}{line}: {report.outcome}")


def _gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (or their indices)."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker per visible GPU; on a machine without one, xdist's own choice (the cores)."""
    return len(_gpus()) or None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """The controller hands each xdist worker its suite run, run folder and share of the machine."""
    run = node.config.stash.get(_RUN, None)
    if run is None:
        return
    workers = node.config.getoption("numprocesses")
    node.workerinput["forgebench"] = {
        "parent_run_id": run.parent_run_id,
        "run_dir": str(run.run_dir),
        "gpus": _gpus(),
        "threads": max(1, (os.cpu_count() or 1) // max(1, int(workers))),
    }


def _pin_worker(worker_id: str, handed: dict) -> None:
    """Worker gwN takes the N-th GPU (before CUDA starts in this process) or its share of the cores;
    the evaluator's sandboxed workers inherit both through their environment."""
    index = int(worker_id.removeprefix("gw"))
    if handed["gpus"]:
        os.environ["CUDA_VISIBLE_DEVICES"] = handed["gpus"][index % len(handed["gpus"])]
    else:
        os.environ["OMP_NUM_THREADS"] = str(handed["threads"])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "task" not in metafunc.fixturenames:
        return
    tasks = metafunc.config.stash.get(_TASKS, [])
    metafunc.parametrize("task", tasks, ids=[t.id for t in tasks])


@pytest.fixture(scope="session")
def suite_run(pytestconfig: pytest.Config):
    return pytestconfig.stash[_RUN]


@pytest.fixture
def outcome(task, suite_run, request):
    """The agent's search on this task, recorded in MLflow; a fault here is a pytest error. A task
    that does not load is an error of its own, with its sentence, and the others run."""
    from harness.evaluate.footprint import TaskTooLarge
    from harness.tasks import BrokenTask

    if isinstance(task, BrokenTask):
        pytest.fail(task.reason, pytrace=False)
    from harness.llm.base import ProviderUnreachable

    progress = _progress(request.config)
    try:
        found = suite_run.run_task(task, progress)
        if progress is not None:
            request.node.user_properties.append((_TASK_LINE, progress.line()))
        return found
    except TaskTooLarge as exc:  # raised before anything ran: nothing of the task is lost
        pytest.skip(str(exc))
    except ProviderUnreachable as exc:  # the task's tree so far is on disk: the same command resumes it
        stop = str(exc)
    request.session.shouldstop = stop
    pytest.fail(stop, pytrace=False)  # outside the except: no chain of litellm's exceptions


def _progress(config: pytest.Config):
    """Live progress in pytest's terminal, written past its output capture; none without a terminal."""
    from harness.progress import Progress

    if hasattr(config, "workerinput"):  # an xdist worker's terminal is not shown: the controller's is
        return Progress(lambda line: None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def uncaptured(show):
        def write(line: str) -> None:
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                show(line)
                reporter.flush()

        return write

    if reporter.isatty():
        return Progress(uncaptured(reporter.write_line), uncaptured(lambda line: reporter.rewrite(line, erase=True)))
    return Progress(uncaptured(reporter.write_line))


def record_benchmark(benchmark, outcome) -> None:
    """The task's best kernel as a pytest-benchmark entry (`--benchmark-json`, `pytest-benchmark
    compare`): its timed calls' distribution as the evaluator measured it in its worker (the
    quantiles it keeps), never a time taken in this process; speedups, cost and rounds as extra_info."""
    # pytest-benchmark's own record (its private API: the version is pinned), filled with the worker's
    # figures; marked used even when it is off (under xdist) so it does not warn of an unused fixture.
    benchmark._mode = "forgebench: the evaluator's timing"
    if not benchmark.enabled:
        return
    result, totals = outcome.agent.best.result, outcome.agent.tree.totals()
    benchmark.extra_info.update(
        {
            "task_hash": outcome.task.content_hash,
            "speedup_vs_eager": result.speedup_vs_eager,
            "speedup_vs_compile": result.speedup_vs_compile,
            "speedups": result.speedups,
            "time_ms": result.time_ms,
            "cost_usd": totals["cost_usd"],
            "rounds": totals["rounds"],
            "llm_calls": totals["llm_calls"],
            "mlflow_run_id": outcome.run_id,
        }
    )
    stats = benchmark._make_stats(1)
    for ms in result.time_quantiles_ms or [result.time_ms]:
        stats.update(ms / 1000.0)


def pytest_unconfigure(config: pytest.Config) -> None:
    run = config.stash.get(_RUN, None)
    if run is not None:
        run.close()
        skip_the_last_collections()  # only the interpreter's end is left after pytest's


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    from leaderboard.table import TASK_COLUMNS, render, summarize, task_runs

    run = config.stash.get(_RUN, None)
    if run is None:
        return
    # This run, ending now (it is still RUNNING in MLflow): not an unfinished one.
    tasks = task_runs(run.recorder.tracking_uri, run.cfg.experiment, run.parent_run_id).assign(suite_status=None)
    if tasks.empty:
        return
    write = terminalreporter.write_line
    terminalreporter.section("ForgeBench leaderboard (this run)")
    write(render(tasks.sort_values("task"), TASK_COLUMNS))
    write("")
    write(render(summarize(tasks)))
    write("")
    write(
        f"records: MLflow {run.recorder.tracking_uri} (experiment '{run.cfg.experiment}', run {run.parent_run_id});"
        f" trees and transcripts: {run.run_dir}"
    )
    if not run.evaluator.work_dir.is_relative_to(run.run_dir.resolve()):
        write(f"candidates' work folders: {run.evaluator.work_dir} (the run folder is closed to the workers' user)")
    write("all runs: forgebench leaderboard")
