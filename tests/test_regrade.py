"""`forgebench regrade`'s bookkeeping around the evaluator (harness/regrade.py): a line as each
solution is built and timed, and a report where a failed solution shows no figure rather than nan.
The evaluator here is a stand-in that records when it is asked to time; tests/evaluate grades
real solutions with the real one."""

import json
import textwrap
import threading

from harness.evaluate.result import EvalResult
from harness.regrade import regrade, render

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


def _folders(tmp_path):
    problems, solutions = tmp_path / "problems" / "level1", tmp_path / "solutions"
    problems.mkdir(parents=True)
    solutions.mkdir()
    for name in ("1_ReLU.py", "2_Broken.py"):
        (problems / name).write_text(textwrap.dedent(PROBLEM))
    (solutions / "1_ReLU.py").write_text("# a kernel\n")
    (solutions / "2_Broken.py").write_text("# broken\n")
    return solutions, problems.parent


def test_each_solution_has_a_line_when_it_is_built_and_before_it_is_timed(tmp_path):
    events: list[str] = []
    solutions, problems = _folders(tmp_path)
    regrade(StandInEvaluator(events), solutions, problems, jobs=2, progress=events.append)
    timed = events.index("evaluate 1_ReLU")
    assert events[0].startswith("building 2 solutions")
    before = events[1:timed]
    assert any(line.startswith("1_ReLU.py (") and line.endswith("builds): built") for line in before), events
    assert any("2_Broken.py (" in line and "not built: compile_error: g++ failed" in line for line in before), events
    assert before[-1] == "timing 1_ReLU.py (1/2)", events
    assert events[timed + 1].startswith("1_ReLU.py (1/2): correct (1 ms, 2x vs eager)"), events
    assert all(len(line) < 300 for line in events)  # a reason's first line, cut


def test_a_failed_solution_shows_no_nan_in_the_report_and_keeps_its_whole_reason(tmp_path):
    solutions, problems = _folders(tmp_path)
    rows = regrade(StandInEvaluator([]), solutions, problems, jobs=1, progress=lambda line: None)
    broken = next(row for row in rows if row["solution"] == "2_Broken.py")
    assert broken["reason"] == LONG_REASON  # report.json's row, whole
    assert json.loads(json.dumps(rows))[1]["speedup_vs_eager"] is None
    report = render(rows)
    assert "nan" not in report.lower(), report
    (line,) = [line for line in report.splitlines() if "2_Broken.py" in line]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[2] == "compile_error" and cells[4:7] == [NO_FIGURE] * 3, cells
    assert "not declared" not in report and len(cells[3]) <= 200  # the table shows the first line, cut
    assert report.startswith("2 solutions regraded: 1 correct, 1 compile_error")


def test_render_formats_the_figures_of_a_correct_solution():
    report = render(
        [
            {
                "solution": "1_ReLU.py", "problem": "1_ReLU", "verdict": "correct", "reason": "",
                "speedup_vs_eager": 1.23456, "speedup_vs_compile": 0.5, "claimed_speedup": 3.5,
                "time_ms": 1.0, "torch_ops": "",
            }
        ]
    )  # fmt: skip
    assert "1.23" in report and "3.5" in report and NO_FIGURE not in report
