"""A published set's solutions through the evaluator, with a line a user can watch for each.

Builds run `jobs` at a time, each in a sandboxed worker that fills the content-addressed build caches,
in the order the solutions are timed: problem by problem, so each problem's reference runs once. The
timings run one at a time on this thread, so no timing shares the machine with another timing. Where
a timing counts device time (a GPU), each solution is timed as soon as its build has ended while the
rest build, and a problem's reference runs while its solutions still build: the device works from
the first build on; the builds' workers run at a lower priority (evaluator.BUILD_NICENESS), so that
a compiler yields the cores a timing's processes want. Where it counts the host's time (a CPU),
builds would slow it: every build ends first. A source that several solutions of a problem share is
built once. Every solution gets a line as its build ends and as its timing starts and ends, with the
time left estimated from those done.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from harness import errors
from harness.errors import ForgeBenchError
from harness.evaluate.result import EvalResult
from harness.regrade.layouts import Solution
from harness.tasks import Task

# The longest reason a progress line shows: its first line, cut here (the records keep it whole).
REASON_CHARS = 200

Graded = Callable[[Solution, EvalResult, float], None]
# A build's outcome: None when it built, else its failed result and the seconds it took.
Built = tuple[EvalResult, float] | None


def first_line(text: str) -> str:
    line = errors.first_line(text)
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def eta(left: float) -> str:
    """Seconds left, as `ETA 1m05s`."""
    minutes, seconds = divmod(round(left), 60)
    return f"ETA {minutes}m{seconds:02d}s" if minutes else f"ETA {seconds}s"


def grade(
    evaluator,
    solutions: list[Solution],
    jobs: int,
    progress: Callable[[str], None],
    graded: Graded,
    *,
    overlap: bool,
) -> None:
    """Build on `jobs` workers while this thread times what has built (with `overlap`; else once all
    have built); `graded` gets each verdict as it is known (a failed build's as soon as this thread
    sees it), with the seconds it took, always from this thread."""
    if solutions:
        _Grading(evaluator, solutions, progress, graded).run(jobs, overlap)


class _Grading:
    def __init__(self, evaluator, solutions: list[Solution], progress: Callable[[str], None], graded: Graded):
        self.evaluator, self.progress, self.graded = evaluator, progress, graded
        self.order = sorted(solutions, key=lambda s: s.task.id)  # stable: the set's order within a problem
        self.numbers = {s.key: f"{n}/{len(self.order)}" for n, s in enumerate(self.order, 1)}
        self.sources = {s.key: s.path.read_text(errors="replace") for s in self.order}
        self.builds: dict[str, Future] = {}  # by solution key; solutions sharing a build share its future
        self.unsettled = list(self.order)  # those whose failed build this thread has not yet recorded
        self.lock = threading.Lock()
        self.started, self.done, self.built = time.monotonic(), 0, 0  # built: the builds ended so far
        self.timed, self.timed_s = 0, 0.0  # the timings so far and their seconds
        self.build_count = len({(s.task.id, self.sources[s.key]) for s in self.order})

    def say(self, line: str) -> None:
        with self.lock:  # from the build threads too: never two lines written into one
            self.progress(line)

    def run(self, jobs: int, overlap: bool) -> None:
        workers = max(1, min(jobs, self.build_count))
        timing = "each timed as soon as it is built" if overlap else "then timing them"
        self.say(f"building {len(self.order)} solutions, {workers} at a time; {timing}, one at a time")
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            shared: dict[tuple[str, str], Future] = {}
            for solution in self.order:
                key = (solution.task.id, self.sources[solution.key])
                if key not in shared:
                    shared[key] = pool.submit(self._build, solution)
                self.builds[solution.key] = shared[key]
            if not overlap:
                wait(shared.values())
            self._time_all()
        finally:
            # Stopped (Ctrl-C, a harness fault): builds in flight end, so none leaves a half-built
            # cache behind, and those not started never start.
            pool.shutdown(wait=True, cancel_futures=True)

    def _build(self, solution: Solution) -> Built:
        began = time.monotonic()
        failed = self.evaluator.build(solution.task, self.sources[solution.key])
        outcome = "built" if failed is None else f"not built: {first_line(failed.summary())}"
        with self.lock:
            self.built = ended = self.built + 1
            left = eta(self._pace(ended) * (self.build_count - ended))
            self.progress(f"{solution.key} ({ended}/{self.build_count} builds): {outcome} · {left}")
        return None if failed is None else (failed, time.monotonic() - began)

    def _time_all(self) -> None:
        for _, solutions in itertools.groupby(self.order, key=lambda s: s.task.id):
            self._time_problem(list(solutions))

    def _time_problem(self, solutions: list[Solution]) -> None:
        """Time the problem's solutions that build, each as soon as it has built, in any order; then
        release its reference (the next problem's timings need the device to themselves)."""
        task, left = solutions[0].task, list(solutions)
        if not any(self.builds[s.key].done() for s in left):
            self._prepare(task)
        while left:
            ready = [s for s in left if self.builds[s.key].done()]
            self._settle()  # after `ready`: records each failed one among them
            if not ready:
                wait([f for f in set(self.builds.values()) if not f.done()], return_when=FIRST_COMPLETED)
                continue
            solution = ready[0]
            left.remove(solution)
            if self.builds[solution.key].result() is None:
                self._time(solution)
        self.evaluator.release(task)

    def _time(self, solution: Solution) -> None:
        number = self.numbers[solution.key]
        self.say(f"timing {solution.key} ({number})")
        began = time.monotonic()
        result = self.evaluator.evaluate(solution.task, self.sources[solution.key])
        seconds = time.monotonic() - began
        self.timed, self.timed_s = self.timed + 1, self.timed_s + seconds
        self._graded(solution, result, seconds)
        self.say(f"{solution.key} ({number}): {first_line(result.summary())} · {eta(self._left())}")

    def _pace(self, ended: int) -> float:
        """Seconds a build at the builds' pace so far (builds run `jobs` at a time)."""
        return (time.monotonic() - self.started) / max(ended, 1)

    def _left(self) -> float:
        """Builds and timings overlap, so what is left takes the longer of the builds still to come at
        their pace and the timings still to come at theirs (the pace of all the graded so far would
        count the first builds' wait against every timing: an hour for a resume of minutes)."""
        builds = self._pace(self.built) * (self.build_count - self.built)
        timings = self.timed_s / max(self.timed, 1) * (len(self.order) - self.done)
        return max(builds, timings)

    def _prepare(self, task: Task) -> None:
        """The problem's reference run while its solutions still build, not after."""
        try:
            self.evaluator.reference(task)
        except ForgeBenchError:
            pass  # raised again by its first timing, if a solution of it builds

    def _settle(self) -> None:
        """Record every failed build that has ended and was not yet recorded."""
        still = []
        for solution in self.unsettled:
            build = self.builds[solution.key]
            if not build.done():
                still.append(solution)
            elif build.result() is not None:
                result, seconds = build.result()
                self._graded(solution, result, seconds)
        self.unsettled = still

    def _graded(self, solution: Solution, result: EvalResult, seconds: float) -> None:
        self.done += 1
        self.graded(solution, result, seconds)
