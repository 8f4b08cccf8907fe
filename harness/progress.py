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
        self._line = ""
        self._task: str | None = None
        self._started = 0.0
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()

    def start_task(self, task_id: str, rounds: int, done: int = 0) -> None:
        with self._lock:
            self._task, self._rounds, self._started = task_id, rounds, time.monotonic()
            self._fields = {"round": done, "verdict": "started" if not done else "resumed", "best": 0.0, "usd": 0.0}
        self._show()
        if self.rewrite is not None:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def node_landed(self, tree, node) -> None:
        """SearchTree's on_add: one more candidate (or model call) is on disk."""
        rounds = sum(1 for n in tree.nodes if n.result is not None)
        verdict = node.result.verdict if node.result is not None else f"no kernel ({node.note or node.action})"
        if node.correct:
            verdict += f" {node.speedup:.3g}x"
        best = max((n.speedup for n in tree.nodes), default=0.0)
        with self._lock:
            self._fields = {"round": rounds, "verdict": verdict, "best": best, "usd": tree.totals()["cost_usd"]}
        self._show(force_line=self.rewrite is None)

    def end_task(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self.rewrite is not None:
            with self._lock:
                self.rewrite(self._describe())
                self.write("")  # the task's last line stays; the test's own result follows below it

    def _describe(self) -> str:
        f = self._fields
        best = f"{f['best']:.3g}x" if f["best"] else "none yet"
        elapsed = time.monotonic() - self._started
        return (
            f"{self._task}: round {f['round']}/{self._rounds}, last {f['verdict']}, best {best}, "
            f"${f['usd']:.4f}, {elapsed:.0f} s"
        )

    def _show(self, force_line: bool = False) -> None:
        # Every write holds the lock: the ticker and the search's thread never interleave a line.
        with self._lock:
            line = self._describe()
            if self.rewrite is not None:
                self.rewrite(line)
            elif force_line or line != self._line:
                self.write(line)
            self._line = line

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            self._show()
