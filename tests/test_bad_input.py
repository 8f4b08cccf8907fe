"""Bad input stopped at the door: each mistake a new user makes gets one sentence naming the culprit,
at start, with a usage-error exit status, no traceback, and nothing written to MLflow or the run folder."""

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch

from harness.config import compose
from harness.errors import ForgeBenchError
from harness.tasks import TASKS_ROOT, BrokenTask, select, survey
from tests.test_suite import RMSNORM_KERNEL, RMSNORM_SMALL, forgebench, suite, suite_command

REPO = Path(__file__).resolve().parents[1]
# What a run would leave behind in its working folder: the embedded store, its artifacts, run folders.
LEFT_BEHIND = ("mlflow.db", "mlruns", "runs", ".forgebench")


def assert_stopped_at_the_door(done: subprocess.CompletedProcess, status: int, culprit: str, cwd: Path, elapsed: float):
    output = done.stdout + done.stderr
    assert done.returncode == status, output[-3000:]
    assert "Traceback" not in output and "pluggy" not in output, output[-3000:]
    assert culprit in output, output[-3000:]
    assert elapsed < 90, f"took {elapsed:.0f} s to refuse"
    assert not [name for name in LEFT_BEHIND if (cwd / name).exists()], sorted(p.name for p in cwd.iterdir())


SUITE_MISTAKES = {
    "timeout_not_a_number": (["--override", "evaluate.timeout_s=abc"], "evaluate.timeout_s is 'abc'"),
    "rounds_out_of_range": (["--override", "budget.rounds=0"], "budget.rounds is 0"),
    "rounds_not_whole": (["--rounds=0"], "budget.rounds is 0"),
    "unknown_setting": (["--override", "evaluate.timeot_s=60"], "'evaluate.timeot_s' is not a setting"),
    "unknown_added_setting": (["--override", "+budget.dollars=3"], "'budget.dollars' is not a setting"),
    "agent_value_wrong_type": (["--override", "agent.exploration=lots"], "agent.exploration is 'lots'"),
    "platform_value_wrong_type": (["--override", "platform.baselines=eager"], "platform.baselines is 'eager'"),
    "unknown_provider": (["--model", "nosuchprovider/foo"], "litellm knows no provider 'nosuchprovider'"),
    "missing_key": (["--model", "openai/gpt-4o"], "OPENAI_API_KEY"),
    "unknown_agent": (["--agent=nosuch"], "unknown agent 'nosuch'"),
    "override_without_equals": (["--override", "evaluate.timeout_s"], "evaluate.timeout_s"),
    "unknown_task": (["--tasks=nope"], "no task matches 'nope'"),
    # A folder in the path that is a file: the embedded store cannot be made.
    "store_unusable": (["--override", "tracking_uri=sqlite:///a_file/x.db"], "the MLflow store at 'sqlite:///a_file"),
    "run_dir_under_a_file": (["--override", "run_dir=a_file/run"], "run_dir: the run folder a_file/run cannot be made"),
    "run_dir_in_proc": (["--override", "run_dir=/proc/x"], "/proc is a kernel filesystem"),
}


@pytest.mark.parametrize("options, culprit", SUITE_MISTAKES.values(), ids=SUITE_MISTAKES.keys())
def test_suite_refuses_bad_input_at_start(tmp_path, options, culprit):
    (tmp_path / "a_file").write_text("")
    started = time.monotonic()
    done = suite(tmp_path, *options)
    assert_stopped_at_the_door(done, 4, culprit, tmp_path, time.monotonic() - started)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the triton platform is available")
def test_suite_refuses_a_gpu_platform_on_a_cpu_machine(tmp_path):
    started = time.monotonic()
    done = suite(tmp_path, "--platform=triton")
    assert_stopped_at_the_door(done, 4, "needs an NVIDIA GPU", tmp_path, time.monotonic() - started)


CLI_MISTAKES = {
    "leaderboard_missing_store": (["leaderboard", "--tracking-uri", "sqlite:///nope.db"], "no MLflow store"),
    "eval_unknown_task": (["eval", "--task", "nope", "--candidate", str(RMSNORM_KERNEL)], "no task matches 'nope'"),
    "eval_bad_setting": (
        ["eval", "--task", "rmsnorm_qwen", "--candidate", str(RMSNORM_KERNEL), "--override", "evaluate.memory_gb=-2"],
        "evaluate.memory_gb is -2",
    ),
    "eval_missing_candidate": (["eval", "--task", "rmsnorm_qwen", "--candidate", "nope.py"], "'nope.py' does not"),
}


@pytest.mark.parametrize("args, culprit", CLI_MISTAKES.values(), ids=CLI_MISTAKES.keys())
def test_cli_refuses_bad_input_at_start(tmp_path, args, culprit):
    started = time.monotonic()
    done = forgebench(tmp_path, *args)
    assert_stopped_at_the_door(done, 2, culprit, tmp_path, time.monotonic() - started)
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "evaluate.timeout_s=abc",
            "evaluate.timeout_s is 'abc' (from the override evaluate.timeout_s=abc), but it must be a number",
        ),
        ("evaluate.warmup_ms=-1", "must be a number of milliseconds, 0 or more (from the override"),
        ("evaluate.check_seeds=[]", "evaluate.check_seeds is [], but it must be a list of at least one seed"),
        ("evaluate.check_seeds=[a]", "evaluate.check_seeds[0] is 'a' (from the override evaluate.check_seeds=[a])"),
        ("budget.usd=-1", "budget.usd is -1.0, but it must be a number of dollars"),
        ("budget.tokens=1.5", "budget.tokens is 1.5 (from the override budget.tokens=1.5), but it must be a whole"),
        ("platform.drop_privileges=maybe", "platform.drop_privileges is 'maybe'"),
        ("agent.in_flight=two", "agent.in_flight is 'two'"),
        ("+agent.temperature=1", "'agent.temperature' is not a setting"),
        ("nosuch=1", "'nosuch' is not a setting"),
    ],
)
def test_a_wrong_value_is_named_with_its_key_value_expectation_and_origin(override, expected):
    with pytest.raises(ForgeBenchError) as info:
        compose(overrides=[override])
    assert expected in str(info.value)


def test_the_schema_holds_the_defaults_and_the_yaml_only_what_differs():
    cfg = compose()
    assert cfg.evaluate.timeout_s == 300.0 and cfg.budget.rounds == 8 and cfg.budget.wall_s == 900.0
    assert cfg.agent.exploration == 1.0  # from conf/agent/mcts.yaml, typed by the MCTS class's fields
    assert "evaluate:" not in (REPO / "conf" / "config.yaml").read_text()


@pytest.fixture
def broken_task():
    """A task folder with invalid YAML, added under tasks/ as a user would, removed afterwards."""
    name = f"zz_broken_{uuid.uuid4().hex[:8]}"
    folder = TASKS_ROOT / name / "badtask"
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text("id: badtask\noperator: [unclosed\n")
    shutil.copy(TASKS_ROOT / "handwritten" / "softmax_rows" / "reference.py", folder / "reference.py")
    yield folder
    shutil.rmtree(folder.parent)


def test_a_broken_task_breaks_only_itself(broken_task):
    tasks, broken = survey()
    assert [b.path for b in broken] == [broken_task]
    assert "not valid YAML at line" in broken[0].reason and str(broken_task / "task.yaml") in broken[0].reason
    assert "rmsnorm_qwen" in {t.id for t in tasks}
    assert "badtask" not in {t.id for t in select("rms*")}
    (hit,) = select(broken_task.parent.name, keep_broken=True)
    assert isinstance(hit, BrokenTask)
    with pytest.raises(ForgeBenchError, match="not valid YAML"):
        select(broken_task.parent.name)


def test_tasks_list_lists_the_others_and_names_the_broken_one(tmp_path, broken_task):
    done = forgebench(tmp_path, "tasks", "list")
    assert done.returncode == 0, done.stderr
    assert "rmsnorm_qwen" in done.stdout and "badtask" not in done.stdout
    assert "task 'badtask' is broken" in done.stderr and "not valid YAML" in done.stderr


def test_a_selection_without_the_broken_task_collects_its_tasks(tmp_path, broken_task):
    done = subprocess.run(
        [*suite_command("--tasks=rms*"), "--collect-only", "-q"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_kernel[rmsnorm_qwen]" in done.stdout and "badtask" not in done.stdout


@pytest.mark.slow
def test_a_selection_with_the_broken_task_shows_it_as_one_error_and_runs_the_rest(tmp_path, broken_task):
    done = suite(tmp_path, "--override", f"tasks=[{broken_task.parent.name},{RMSNORM_SMALL}]", "--rounds=1")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 passed, 1 error" in done.stdout, done.stdout[-3000:]
    assert "ERROR at setup of test_kernel[badtask]" in done.stdout
    assert f"{broken_task / 'task.yaml'}: is not valid YAML at line" in done.stdout


def test_a_task_folder_is_a_task_wherever_it_is_named(tmp_path):
    folder = tmp_path / "mine" / "my_softmax"
    folder.mkdir(parents=True)
    shutil.copy(TASKS_ROOT / "handwritten" / "softmax_rows" / "reference.py", folder / "reference.py")
    (folder / "task.yaml").write_text("id: my_softmax\noperator: aten._softmax\ntolerance: {atol: 0.001}\n")
    (task,) = select(str(folder))
    assert task.id == "my_softmax" and task.tolerance == {"atol": 0.001} and task.source == "mine"
    assert [t.id for t in select(str(tmp_path / "mine"))] == ["my_softmax"]  # a folder of task folders
    done = subprocess.run(
        [*suite_command(f"--tasks={folder}"), "--collect-only", "-q"], cwd=tmp_path, capture_output=True, text=True
    )
    assert "test_kernel[my_softmax]" in done.stdout, done.stdout + done.stderr


def test_a_reference_that_does_not_parse_is_reported_at_load(tmp_path):
    folder = tmp_path / "src" / "demo"
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text("id: demo\noperator: x\n")
    (folder / "reference.py").write_text("class Model(:\n")
    (hit,) = select(str(folder), keep_broken=True)
    assert isinstance(hit, BrokenTask) and "is not valid Python at line 1" in hit.reason


@pytest.mark.skipif(os.getuid() != 0, reason="workers drop to nobody only when the harness is root")
def test_a_run_folder_closed_to_nobody_moves_the_workers_folders_and_still_evaluates(tmp_path, make_evaluator):
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    private.chmod(0o700)  # a root user's home: nobody cannot pass through
    evaluator = make_evaluator(root=private)
    assert not evaluator.work_dir.is_relative_to(private) and not evaluator.cache_dir.is_relative_to(private)
    result = evaluator.evaluate(select(str(RMSNORM_SMALL))[0], RMSNORM_KERNEL.read_text())
    assert result.verdict == "correct", result.reason
    assert not (private / "work").exists()


def test_the_suite_help_runs_without_a_configuration_check():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suite"), "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0 and "--override" in done.stdout
