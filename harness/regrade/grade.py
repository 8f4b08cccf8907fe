"""A published set's solutions through the evaluator, with a line a user can watch for each.

Builds run in parallel across the cores first (each in a sandboxed worker, filling the content-
addressed build caches); the evaluations then run one at a time, so no timing shares the machine with
another, grouped by problem so each reference runs once. Every solution gets a line as its build
ends and as its timing starts and ends, with the time left estimated from those done.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from harness import errors
from harness.evaluate.result import EvalResult
from harness.regrade.layouts import Solution

# The longest reason a progress line shows: its first line, cut here (the records keep it whole).
REASON_CHARS = 200

Graded = Callable[[Solution, EvalResult, float], None]


def first_line(text: str) -> str:
    line = errors.first_line(text)
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def eta(started: float, done: int, total: int) -> str:
    """The time left at the pace so far, as `ETA 1m05s`."""
    left = (time.monotonic() - started) / max(done, 1) * (total - done)
    minutes, seconds = divmod(round(left), 60)
    return f"ETA {minutes}m{seconds:02d}s" if minutes else f"ETA {seconds}s"


def grade(
    evaluator,
    solutions: list[Solution],
    jobs: int,
    progress: Callable[[str], None],
    graded: Graded,
) -> None:
    """Build every solution, then time each that built; `graded` gets each verdict as it is known
    (failed builds first), with the seconds it took."""
    if not solutions:
        return
    sources = {s.key: s.path.read_text(errors="replace") for s in solutions}
    failed = _build_all(evaluator, solutions, sources, jobs, progress)
    for solution in solutions:
        if failed[solution.key] is not None:
            result, seconds = failed[solution.key]
            graded(solution, result, seconds)
    built = sorted((s for s in solutions if failed[s.key] is None), key=lambda s: s.task.id)
    started = time.monotonic()
    for number, solution in enumerate(built, 1):
        progress(f"timing {solution.key} ({number}/{len(built)})")
        began = time.monotonic()
        result = evaluator.evaluate(solution.task, sources[solution.key])
        last_of_its_task = number == len(built) or built[number].task.id != solution.task.id
        if last_of_its_task:
            evaluator.release(solution.task)
        graded(solution, result, time.monotonic() - began)
        progress(
            f"{solution.key} ({number}/{len(built)}): {first_line(result.summary())}"
            f" · {eta(started, number, len(built))}"
        )


def _build_all(evaluator, solutions: list[Solution], sources: dict, workers: int, progress) -> dict:
    """Build every solution, `workers` at a time (they only compile and import): by key, None for each
    that built, else its failed result and the seconds it took. A line as each build ends, never two
    written into one."""
    workers = min(workers, len(solutions))
    progress(f"building {len(solutions)} solutions, {workers} at a time; then timing them one at a time")
    lock, ended, started = threading.Lock(), itertools.count(1), time.monotonic()

    def build(solution: Solution):
        began = time.monotonic()
        failed = evaluator.build(solution.task, sources[solution.key])
        outcome = "built" if failed is None else f"not built: {first_line(failed.summary())}"
        with lock:
            done = next(ended)
            left = eta(started, done, len(solutions))
            progress(f"{solution.key} ({done}/{len(solutions)} builds): {outcome} · {left}")
        return None if failed is None else (failed, time.monotonic() - began)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip((s.key for s in solutions), pool.map(build, solutions)))
