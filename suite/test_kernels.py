"""One test per task: passes when the agent produced a correct kernel, fails with the verdict otherwise."""

from conftest import record_benchmark


def test_kernel(task, outcome, benchmark):
    best = outcome.agent.best
    if best is None:
        last = outcome.agent.tree.nodes[-1] if outcome.agent.tree.nodes else None
        detail = last.outcome() if last else "the agent evaluated no candidate"
        raise AssertionError(
            f"no correct kernel for {task.id} after {len(outcome.agent.tree)} rounds "
            f"(stopped by {outcome.agent.stop_reason}); last: {detail}"
        )
    # What a user reads off the row: a speedup needs a baseline that was timed.
    result = best.result
    assert result.speedups, f"{task.id}: the best kernel was timed against no baseline ({result.baselines_skipped})"
    record_benchmark(benchmark, outcome)
