"""`forgebench regrade`'s bookkeeping around the evaluator (harness/regrade/grade.py, report.py): a
line as each solution is built and timed with the time left, and a report where a failed solution
shows no figure rather than nan. The evaluator here is a stand-in that records when it is asked to
time; tests/regrade/ grades real solutions with the real one."""

import json
import textwrap
import threading

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
    """Builds `1_ReLU.py` and times it as correct; `2_Broken.py` fails to build. Every call and every
    progress line lands in one list, in order."""

    def __init__(self, events: list[str]):
        self.events, self._lock = events, threading.Lock()

    def build(self, task, source: str) -> EvalResult | None:
        if "broken" in source:
            return EvalResult(task.id, "cpu", "compile_error", reason=LONG_REASON)
        return None

    def evaluate(self, task, source: str) -> EvalResult:
        with self._lock:
            self.events.append(f"evaluate {task.id}")
        return EvalResult(task.id, "cpu", "correct", time_ms=1.0, speedup_vs_eager=2.0, speedups={"eager": 2.0})

    def release(self, task) -> None:
        pass


def _published(tmp_path):
    problems, solutions = tmp_path / "problems" / "level1", tmp_path / "solutions"
    problems.mkdir(parents=True)
    solutions.mkdir()
    for name in ("1_ReLU.py", "2_Broken.py"):
        (problems / name).write_text(textwrap.dedent(PROBLEM))
    (solutions / "1_ReLU.py").write_text("# a kernel\n")
    (solutions / "2_Broken.py").write_text("# broken\n")
    (solutions / "claims.json").write_text(json.dumps({"1_ReLU": 2.1, "2_Broken": 3.0}))
    return read(solutions, "auto", problems.parent)


def _graded(published, evaluator, progress) -> list[dict]:
    rows = []
    grade(evaluator, published.solutions, 2, progress, lambda s, result, wall_s: rows.append(row(s, result, "sha")))
    return rows


def test_each_solution_has_a_line_when_it_is_built_and_before_it_is_timed(tmp_path):
    events: list[str] = []
    published = _published(tmp_path)
    _graded(published, StandInEvaluator(events), events.append)
    timed = events.index("evaluate 1_ReLU")
    assert events[0].startswith("building 2 solutions")
    before = events[1:timed]
    assert any(line.startswith("1_ReLU.py (") and "builds): built · ETA" in line for line in before), events
    assert any("2_Broken.py (" in line and "not built: compile_error: g++ failed" in line for line in before), events
    assert before[-1] == "timing 1_ReLU.py (1/1)", events
    assert events[timed + 1].startswith("1_ReLU.py (1/1): correct (1 ms, 2x vs eager) · ETA "), events
    assert all(len(line) < 300 for line in events)  # a reason's first line, cut


def test_a_failed_solution_shows_no_nan_in_the_report_and_keeps_its_whole_reason(tmp_path):
    rows = _graded(_published(tmp_path), StandInEvaluator([]), lambda line: None)
    broken = next(r for r in rows if r["solution"] == "2_Broken.py")
    assert broken["reason"] == LONG_REASON  # report.json's row, whole
    assert json.loads(json.dumps(rows, allow_nan=False))[0]["speedup_vs_eager"] is None
    report = render(rows)
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
