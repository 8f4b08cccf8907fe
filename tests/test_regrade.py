"""`forgebench regrade`'s bookkeeping around the evaluator (harness/regrade/grade.py, report.py): a
line as each solution is built and timed with the time left, and a report where a failed solution
shows no figure rather than nan. The evaluator here is a stand-in that records when it is asked to
time; tests/regrade/ grades real solutions with the real one."""

import dataclasses
import json
import textwrap
import threading
import time

import pytest

from harness.evaluate.result import EvalResult
from harness.regrade.grade import grade
from harness.regrade.layouts import read
from harness.regrade.report import Journal, render, row

# What a cell shows where a failed solution has no figure.
NO_FIGURE = "—"

PROBLEM = """
import torch
from torch import nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(8, 8)]

def get_init_inputs():
    return []
"""

# A compiler's error as a worker reports it: several lines, the first past the table's cut.
LONG_REASON = "g++ failed: " + "x" * 300 + "\nsolution.cpp:3: error: 'y' was not declared\n1 error generated"


class StandInEvaluator:
    """Builds `1_ReLU.py` and times it as correct; `2_Broken.py` fails to build; `3_Slow.py` builds
    until `1_ReLU` has been timed (at most `patience_s`). Every call, build end and progress line
    lands in one list, in order."""

    def __init__(self, events: list[str], patience_s: float = 10.0):
        self.events, self._lock = events, threading.Lock()
        self.first_timed, self.patience_s = threading.Event(), patience_s
        self.built: list[str] = []

    def _note(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def build(self, task, source: str) -> EvalResult | None:
        if "slow" in source:
            self.first_timed.wait(self.patience_s)
        self._note(f"build ended {task.id}")
        self.built.append(source)
        if "broken" in source:
            return EvalResult(task.id, "cpu", "compile_error", reason=LONG_REASON)
        return None

    def evaluate(self, task, source: str) -> EvalResult:
        self._note(f"evaluate {task.id}")
        self.first_timed.set()
        return EvalResult(task.id, "cpu", "correct", time_ms=1.0, speedup_vs_eager=2.0, speedups={"eager": 2.0})

    def reference(self, task) -> None:
        self._note(f"reference {task.id}")

    def release(self, task) -> None:
        self._note(f"release {task.id}")


def _published(tmp_path, slow: bool = False):
    problems, solutions = tmp_path / "problems" / "level1", tmp_path / "solutions"
    problems.mkdir(parents=True)
    solutions.mkdir()
    names = ("1_ReLU.py", "2_Broken.py", *(("3_Slow.py",) if slow else ()))
    for name in names:
        (problems / name).write_text(textwrap.dedent(PROBLEM))
    (solutions / "1_ReLU.py").write_text("# a kernel\n")
    (solutions / "2_Broken.py").write_text("# broken\n")
    if slow:
        (solutions / "3_Slow.py").write_text("# a slow build\n")
    (solutions / "claims.json").write_text(json.dumps({"1_ReLU": 2.1, "2_Broken": 3.0}))
    return read(solutions, "auto", problems.parent)


def _graded(published, evaluator, progress, jobs: int = 2, overlap: bool = True) -> list[dict]:
    rows = []
    grade(
        evaluator,
        published.solutions,
        jobs,
        progress,
        lambda s, result, wall_s: rows.append(row(s, result, "sha")),
        overlap=overlap,
    )
    return rows


def test_each_solution_has_a_line_when_it_is_built_and_before_it_is_timed(tmp_path):
    events: list[str] = []
    published = _published(tmp_path)
    _graded(published, StandInEvaluator(events), events.append)
    assert events[0] == "building 2 solutions, 2 at a time; each timed as soon as it is built, one at a time"
    built = next(
        i for i, line in enumerate(events) if line.startswith("1_ReLU.py (") and "builds): built · ETA" in line
    )
    timing = events.index("timing 1_ReLU.py (1/2)")
    assert built < timing < events.index("evaluate 1_ReLU"), events
    assert events[events.index("evaluate 1_ReLU") + 1].startswith("1_ReLU.py (1/2): correct (1 ms, 2x vs eager) · ETA ")
    assert any("2_Broken.py (" in line and "not built: compile_error: g++ failed" in line for line in events), events
    assert "timing 2_Broken.py" not in " ".join(events) and "release 1_ReLU" in events, events
    assert all(len(line) < 300 for line in events)  # a reason's first line, cut


def test_the_eta_is_the_longer_of_the_builds_and_the_timings_left_each_at_its_own_pace(monkeypatch):
    from types import SimpleNamespace

    from harness.regrade import grade as grading

    monkeypatch.setattr(grading, "time", SimpleNamespace(monotonic=lambda: 100.0))
    state = grading._Grading.__new__(grading._Grading)  # a resume 100 s in: 10 of 60 builds, 4 timed
    state.started, state.built, state.build_count, state.order = 0.0, 10, 60, [None] * 62
    state.timed, state.timed_s, state.done = 4, 16.0, 4
    assert state._left() == 500.0  # 50 builds at 10 s; the 58 timings at 4 s (232 s) run beside them
    state.built = 60
    assert state._left() == 232.0  # not 58 x 25 s, the pace of the graded counting the builds' wait
    assert grading.eta(500.0) == "ETA 8m20s" and grading.eta(42.4) == "ETA 42s"


def test_the_first_solution_is_timed_before_the_last_build_ends(tmp_path):
    events: list[str] = []
    evaluator = StandInEvaluator(events)
    rows = _graded(_published(tmp_path, slow=True), evaluator, events.append)
    assert events.index("evaluate 1_ReLU") < events.index("build ended 3_Slow"), events
    assert sorted(r["solution"] for r in rows) == ["1_ReLU.py", "2_Broken.py", "3_Slow.py"]
    # Problem by problem: each reference released once, after its last timing, before the next's.
    assert [e for e in events if e.startswith(("evaluate", "release")) and "2_Broken" not in e] == [
        "evaluate 1_ReLU",
        "release 1_ReLU",
        "evaluate 3_Slow",
        "release 3_Slow",
    ]


def test_a_solution_is_timed_while_an_earlier_one_of_its_problem_still_builds(tmp_path):
    relu = next(s for s in _published(tmp_path).solutions if s.key == "1_ReLU.py")
    (tmp_path / "slow_relu.py").write_text("# a slow build\n")
    slow = dataclasses.replace(relu, key="alpha/1_ReLU.py", path=tmp_path / "slow_relu.py", model="alpha")
    events: list[str] = []
    grade(StandInEvaluator(events), [slow, relu], 2, events.append, lambda *_: None, overlap=True)
    ended = [i for i, e in enumerate(events) if e == "build ended 1_ReLU"]
    assert events.index("timing 1_ReLU.py (2/2)") < events.index("evaluate 1_ReLU") < ended[1], events
    assert events[-1] == "release 1_ReLU" and events.count("release 1_ReLU") == 1, events


def test_where_a_timing_counts_the_hosts_time_every_build_ends_first(tmp_path):
    events: list[str] = []
    _graded(_published(tmp_path, slow=True), StandInEvaluator(events, patience_s=0.5), events.append, overlap=False)
    assert events[0] == "building 3 solutions, 2 at a time; then timing them, one at a time"
    assert events.index("build ended 3_Slow") < events.index("evaluate 1_ReLU"), events
    assert "reference 1_ReLU" not in events  # run by the first timing, on a machine no build shares


def test_a_source_that_solutions_share_is_built_once(tmp_path):
    published = _published(tmp_path)
    relu = next(s for s in published.solutions if s.key == "1_ReLU.py")
    again = dataclasses.replace(relu, key="beta/1_ReLU.py", model="beta")
    evaluator, rows = StandInEvaluator([]), []
    grade(evaluator, [relu, again], 4, lambda line: None, lambda s, result, wall_s: rows.append(s.key), overlap=True)
    assert evaluator.built == ["# a kernel\n"] and rows == ["1_ReLU.py", "beta/1_ReLU.py"]


class BrokenFirst(StandInEvaluator):
    """1_ReLU's build ends only once 2_Broken's failure has been recorded (at most patience_s)."""

    def __init__(self, events: list[str]):
        super().__init__(events)
        self.recorded = threading.Event()

    def build(self, task, source: str) -> EvalResult | None:
        if task.id == "1_ReLU":
            self.recorded.wait(self.patience_s)
        return super().build(task, source)


def test_a_failed_build_is_recorded_as_it_ends_while_an_earlier_one_still_builds(tmp_path):
    events: list[str] = []
    evaluator = BrokenFirst(events)

    def graded(solution, result, wall_s):
        events.append(f"graded {solution.key}")
        if solution.key == "2_Broken.py":
            evaluator.recorded.set()

    grade(evaluator, _published(tmp_path).solutions, 2, events.append, graded, overlap=True)
    # Journaled at once: a regrade stopped now would not build it again.
    assert events.index("graded 2_Broken.py") < events.index("build ended 1_ReLU"), events


class BuildsUntilReferenced(StandInEvaluator):
    """1_ReLU's build ends only once its problem's reference has run (at most patience_s)."""

    def __init__(self, events: list[str]):
        super().__init__(events)
        self.referenced = threading.Event()

    def reference(self, task) -> None:
        super().reference(task)
        self.referenced.set()

    def build(self, task, source: str) -> EvalResult | None:
        if task.id == "1_ReLU":
            self.referenced.wait(self.patience_s)
        return super().build(task, source)


def test_a_problems_reference_runs_while_its_first_solution_builds(tmp_path):
    events: list[str] = []
    _graded(_published(tmp_path), BuildsUntilReferenced(events), events.append)
    assert events.index("reference 1_ReLU") < events.index("build ended 1_ReLU") < events.index("evaluate 1_ReLU")


class StoppedAtFirstTiming(StandInEvaluator):
    """Ctrl-C during the first timing, while 2_Broken may be building; builds take a moment."""

    def build(self, task, source: str) -> EvalResult | None:
        self._note(f"build started {task.id}")
        time.sleep(0.2)
        return super().build(task, source)

    def evaluate(self, task, source: str) -> EvalResult:
        raise KeyboardInterrupt


def test_a_stopped_regrade_lets_builds_in_flight_end_and_starts_no_other(tmp_path):
    events: list[str] = []
    published = _published(tmp_path, slow=True)
    with pytest.raises(KeyboardInterrupt):
        grade(StoppedAtFirstTiming(events), published.solutions, 1, events.append, lambda *_: None, overlap=True)
    started = [e.removeprefix("build started ") for e in events if e.startswith("build started ")]
    ended = [e.removeprefix("build ended ") for e in events if e.startswith("build ended ")]
    assert "3_Slow" not in started and started == ended, events


def test_a_failed_solution_shows_no_nan_in_the_report_and_keeps_its_whole_reason(tmp_path):
    rows = _graded(_published(tmp_path), StandInEvaluator([]), lambda line: None)
    broken = next(r for r in rows if r["solution"] == "2_Broken.py")
    assert broken["reason"] == LONG_REASON  # report.json's row, whole
    assert json.loads(json.dumps(broken, allow_nan=False))["speedup_vs_eager"] is None
    report = render(sorted(rows, key=lambda r: r["solution"], reverse=True))  # ties count in the rows' order
    assert "nan" not in report.lower(), report
    (line,) = [line for line in report.splitlines() if "2_Broken.py" in line]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[3] == "compile_error" and cells[5:7] == [NO_FIGURE] * 2, cells
    assert "not declared" not in report and len(cells[4]) <= 200  # the table shows the first line, cut
    assert report.startswith("2 solutions regraded: 1 compile_error, 1 correct; claims: 1 confirmed, 1 refuted")


def test_a_claim_is_confirmed_at_nine_tenths_of_it_and_refuted_below(tmp_path):
    published = _published(tmp_path)
    relu = next(s for s in published.solutions if s.key == "1_ReLU.py")
    measured = EvalResult("1_ReLU", "cpu", "correct", time_ms=1.0, speedup_vs_eager=1.9)
    assert row(relu, measured, "sha")["claim"] == "confirmed"  # 1.9 >= 0.9 x 2.1
    measured.speedup_vs_eager = 1.8
    assert row(relu, measured, "sha")["claim"] == "refuted"


def test_the_journal_skips_a_torn_last_line_and_a_changed_solution(tmp_path):
    published = _published(tmp_path)
    relu, broken = sorted(published.solutions, key=lambda s: s.key)[:2][::-1]
    journal = Journal(tmp_path / "graded.jsonl")
    journal.add(row(relu, EvalResult("1_ReLU", "cpu", "correct", time_ms=1.0), "sha-1"))
    with open(tmp_path / "graded.jsonl", "a") as f:
        f.write('{"solution": "2_Broken.py", "verd')  # killed mid-write
    again = Journal(tmp_path / "graded.jsonl")
    assert again.done(relu, "sha-1") and not again.done(relu, "sha-2") and not again.done(broken, "sha-1")
