"""The README and the documentation as a user meets them: the README's commands run as written (those
quick on a CPU; every other one is listed with the reason it is not run here), the README stays short,
and no documentation, code or test names a round of work by its ordinal (history lives in git)."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MAX_README_LINES = 250

# What is not run here, by the command's start, and why. A README command that is neither here nor in
# RUN fails test_every_readme_command_is_run_or_skipped_with_a_reason: a new command gets one or the other.
SKIPPED = [
    (r"python3 -m venv \.venv .*pytest suite/", "the install and a suite run: .ci/run does both on a clean checkout"),
    (r"python3 -m venv \.venv .*pytest tests/", "the project's whole test suite: it is what .ci/run runs"),
    (r"pytest suite/ -n auto", "one worker per GPU: needs GPUs (tests/test_records.py runs the suite under xdist)"),
    (r"pytest suite/ --model=gpt-4o", "a provider's model: needs OPENAI_API_KEY and the network"),
    (r"pytest suite/", "a suite run, minutes on a 2-core machine: tests/test_suite.py runs the suite end to end"),
    (r"forgebench capture --model resnet50", "a capture on a GPU: needs CUDA and torchvision"),
    (r"forgebench capture --model mypkg", "the model and DIR are the reader's (tests/capture/ captures a fixture)"),
    (r"forgebench compare 1a2b3c", "1a2b3c and 4d5e6f stand for the reader's run ids (tests/leaderboard/ has runs)"),
    (r"forgebench compare --by model", "needs runs of two models in one task set (tests/leaderboard/ has them)"),
    (r"forgebench e2e ", "RUN is a suite run of a captured model (tests/integrate/test_e2e.py runs a fixture's)"),
    (r"forgebench export ", "RUN is a suite run that e2e ran on (tests/integrate/ exports and applies a bundle)"),
    (r"forgebench regrade path/to/", "path/to/solutions is the reader's folder (tests/test_regrade.py regrades one)"),
    (r"forgebench run -m model=gpt-4o", "a sweep of providers' models: needs API keys (tests/test_sweep.py runs one)"),
    (r"export MLFLOW_TRACKING_URI=", "needs a team's MLflow server (tests/test_team_server.py starts one)"),
]
# What is run, and where: "repo" in the repository root, "store" in a folder holding a recorded suite run.
RUN = {
    "forgebench --help": "repo",
    "forgebench tasks list": "repo",
    "forgebench eval --task rmsnorm_qwen --candidate tests/candidates/rmsnorm_cpp.py --platform cpu --json": "repo",
    ".venv/bin/forgebench leaderboard": "store",
    ".venv/bin/forgebench leaderboard --per-task": "store",
    "forgebench leaderboard": "store",
    "forgebench leaderboard --format json --out board.json": "store",
    "forgebench leaderboard --suite gpu-offline --agent mcts --platform triton --since 2026-11-30": "store",
    "forgebench leaderboard --e2e": "store",
    "forgebench site site/": "store",
}

# Ordinals of work rounds: an ordinal word before "session" (within a few words) or before "round of
# work/checks", and a session or round numbered with digits ("round 3/3", an agent's round of a task,
# is the product's own word and is not one).
_ORDINAL = (
    r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|"
    r"fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\d+(?:st|nd|rd|th)"
)
ROUND_OF_WORK = re.compile(
    rf"\b(?:{_ORDINAL})\b[\w ,'-]{{0,20}}\bsessions?\b"
    rf"|\b(?:{_ORDINAL})\s+rounds?\s+of\s+(?:work|checks|review)"
    r"|\bsession[ _-]?\d+(?![\d/])"
    r"|\bround[ _-]?\d+(?![\d/])",
    re.IGNORECASE,
)
SCANNED = ["README.md", "docs", "harness", "leaderboard", "suite", "tests", "benchmarks"]
TEXT_SUFFIXES = {".md", ".py", ".sh", ".yaml", ".yml", ".txt", ".json", ".log", ".j2", ".html", ".toml", ".css", ".js"}


def readme_commands() -> list[str]:
    """Each line of the README's bash blocks, its trailing comment taken off."""
    commands, in_block = [], False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            in_block = line.strip() == "```bash" and not in_block
            continue
        if in_block and line.strip():
            commands.append(re.sub(r"\s+#\s.*$", "", line).strip())
    return commands


def _skip_reason(command: str) -> str | None:
    return next((reason for pattern, reason in SKIPPED if re.match(pattern, command)), None)


def test_the_readme_is_at_most_250_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines, over {MAX_README_LINES}: move detail into docs/"


def test_the_readme_keeps_the_test_command_ci_runs():
    """.ci/run runs the README's test command on a clean checkout: the README must still show it."""
    shown = [c for c in readme_commands() if ".venv/bin/pip install -q -e '.[dev]'" in c and "pytest tests/" in c]
    assert shown, "README.md no longer shows the test command .ci/run runs (install '.[dev]', then pytest tests/)"
    assert ".venv/bin/pytest tests/" in (REPO / ".ci" / "run").read_text()


def test_every_readme_command_is_run_or_skipped_with_a_reason():
    unaccounted = [c for c in readme_commands() if c not in RUN and _skip_reason(c) is None]
    assert not unaccounted, f"README commands neither run by this test nor skipped with a reason: {unaccounted}"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A folder with an mlflow.db holding two recorded suite runs, as after the quick start."""
    from tests.leaderboard.test_leaderboard import H200_EXPERT_TASKS, H200_TASKS, _record

    folder = tmp_path_factory.mktemp("readme_store")
    _record(folder / "mlflow.db", H200_TASKS)
    _record(folder / "mlflow.db", H200_EXPERT_TASKS)
    return folder


@pytest.mark.parametrize("command", readme_commands(), ids=lambda c: c[:70])
@pytest.mark.slow
def test_a_readme_command_runs_as_written(command, store, tmp_path):
    where = RUN.get(command)
    if where is None:
        pytest.skip(_skip_reason(command) or "not accounted for (see the test above)")
    words = shlex.split(command)
    name = words[0].rsplit("/", 1)[-1]
    words[0] = str(Path(sys.executable).parent / name)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["FORGEBENCH_CACHE"] = str(tmp_path / "cache")  # a run from the repository writes no cache there
    cwd = REPO if where == "repo" else store
    done = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command!r} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if "--json" in words:
        assert '"verdict": "correct"' in done.stdout, done.stdout[-2000:]


def _scanned_files():
    for top in SCANNED:
        path = REPO / top
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if "__pycache__" not in file.parts:
                yield file


def test_no_file_name_names_a_round_of_work():
    named = [str(f.relative_to(REPO)) for f in _scanned_files() if ROUND_OF_WORK.search(f.name.replace("_", " "))]
    assert not named, f"file names that say in which round of work they were made (history lives in git): {named}"


def test_no_text_names_a_round_of_work():
    found = []
    for file in _scanned_files():
        if file.suffix not in TEXT_SUFFIXES:
            continue
        try:
            text = file.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            match = ROUND_OF_WORK.search(line)
            if match:
                found.append(f"{file.relative_to(REPO)}:{number}: {match.group(0)!r}")
    assert not found, "text that names a round of work by its ordinal (say what, not when):\n" + "\n".join(found)
