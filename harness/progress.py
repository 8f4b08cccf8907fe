"""A suite run's progress in the terminal: a live line per task on a TTY, a line per candidate elsewhere."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# On a TTY the line is redrawn this often, so a long evaluation is never silent.
TICK_S = 1.0


class Progress:
    """What a person watching the run sees: task id, round r/N, last verdict, best speedup so far,
    dollars spent and elapsed time. `rewrite` redraws the current line (a TTY); without it each
    candidate gets a line of its own (CI logs)."""

    def __init__(self, write: Callable[[str], None], rewrite: Callable[[str], None] | None = None):
        self.write, self.rewrite = write, rewrite
        self._lock = threading.Lock()
        self._task: str | None = None
        self._started = 0.0
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def start_task(self, task_id: str, rounds: int, tree) -> None:
        """A task begins, or resumes from a persisted tree (whose figures the line starts from)."""
        with self._lock:
            self._task, self._rounds, self._started = task_id, rounds, time.monotonic()
            self._fields = _figures(tree, "resumed" if tree.nodes else "started")
        self._show()
        if self.rewrite is not None:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def node_landed(self, tree, node) -> None:
        """SearchTree's on_add: one more candidate (or model call) is on disk."""
        verdict = node.result.verdict if node.result is not None else f"no kernel ({node.note or node.action})"
        if node.correct:
            verdict += f" {node.speedup:.3g}x"
        with self._lock:
            self._fields = _figures(tree, verdict)
        self._show()

    def end_task(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self.rewrite is not None:
            with self._lock:
                self.rewrite(self.line())
                self.write("")  # the task's last line stays; the test's own result follows below it

    def line(self) -> str:
        """The task's line as it stands: what the terminal shows, and (under xdist) what a worker
        hands the controller with the test's report when the task ends."""
        f = self._fields
        best = f"{f['best']:.3g}x" if f["best"] else "none yet"
        elapsed = time.monotonic() - self._started
        return (
            f"{self._task}: round {f['round']}/{self._rounds}, last {f['verdict']}, best {best}, "
            f"${f['usd']:.4f}, {elapsed:.0f} s"
        )

    def _show(self) -> None:
        # Every write holds the lock: the ticker and the search's thread never interleave a line.
        with self._lock:
            (self.rewrite or self.write)(self.line())

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self._show()


def _figures(tree, verdict: str) -> dict:
    """What the line shows of a tree: candidates evaluated, the last verdict, best speedup, dollars."""
    totals, best = tree.totals(), tree.best()
    return {
        "round": totals["rounds"],
        "verdict": verdict,
        "best": best.speedup if best else 0.0,
        "usd": totals["cost_usd"],
    }
