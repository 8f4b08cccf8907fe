"""The text `forgebench e2e` prints, from a model run's findings written out by hand."""

from harness.integrate import e2e_report

SLOWER = (
    "in place it takes 0.1234 ms (p80 0.1301) against the task's calls' 0.1001 ms (p20 0.0998): "
    "not faster by more than the timing spread"
)


def _found(decisions: list[dict]) -> dict:
    """The fewest findings describe() reads: eager, the patched model and the graph pass timed on a CPU."""
    timing = lambda ms: {"median_ms": ms, "p20_ms": ms, "p80_ms": ms, "host_ms": ms}
    return {
        "model": "tiny",
        "run_id": "r",
        "request": {"device": "cpu", "compile": False},
        "timings": {"eager": timing(2.0), "patched_eager": timing(1.0), "graph_only": timing(2.1)},
        "decisions": decisions,
        "predicted_speedup": 2.0,
        "predicted_speedup_in_place": 1.9,
        "share_of_time_replaced": 0.5,
        "patch_overhead_us_per_call": 0.1,
        "patched_vs_eager": "faster",
        "aten_calls_per_forward": 10,
        "hits_per_forward": {"kept_task": 1},
        "unmatched_calls": 0,
    }


def _why_column(told: str) -> list[str]:
    """The decisions table's "why" cells, a line of the table each (a wrapped reason takes several)."""
    lines = told.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("task") and line.rstrip().endswith("why"))
    start = lines[header].index("why")
    return [line[start:].strip() for line in lines[header + 2 : -1]]


def test_the_why_column_gives_a_reason_whole_not_cut_at_a_fixed_width():
    decisions = [
        {"task_id": "kept_task", "decision": "kept", "reason": "", "in_place_speedup": 1.5},
        {"task_id": "slow_task", "decision": "slower_in_place", "reason": SLOWER, "in_place_speedup": 0.8},
    ]
    told = e2e_report.describe(_found(decisions))
    why = _why_column(told)
    assert " ".join(c for c in why if c) == SLOWER, told
    assert not any(c.endswith(": no") for c in why), told


def test_a_long_why_is_cut_at_a_words_end():
    reason = "wrong on the model's own activations (call 1 of 2): " + "mismatch at index 12345 " * 40
    told = e2e_report.describe(_found([{"task_id": "t", "decision": "incorrect_in_model", "reason": reason}]))
    said = " ".join(c for c in _why_column(told) if c)
    assert said.endswith("12345 ...") and len(said) <= e2e_report.WHY_CHARS, told
    assert reason.startswith(said.removesuffix(" ..."))
