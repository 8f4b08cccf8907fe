"""Verdicts: the one place where what happened to a candidate becomes its verdict and reason.

The worker ends an evaluation early by raising `Verdict`; everything else the parent learns (how
the worker exited, what the judge found in its outputs, how its time compares with the device's
floor) is turned into a verdict by the functions below, never by reading a reason's words.
"""

from __future__ import annotations

import signal

VERDICTS = ("correct", "incorrect", "compile_error", "runtime_error", "timeout", "crash", "rejected")


def shorten(text: str, limit: int = 2000) -> str:
    """A reason short enough to record: its head and its tail (where an error's cause usually is)."""
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2 :]


class Verdict(Exception):
    """Ends an evaluation with a verdict and a reason (raised in the worker)."""

    def __init__(self, verdict: str, reason: str):
        if verdict not in VERDICTS:
            raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


class HarnessFault(Exception):
    """The worker could not do its part for a reason of the harness's (a module of the standard
    library it cannot read), not the candidate's: the task errors with it, no verdict is given."""

    def __init__(self, module: str, reason: str):
        super().__init__(reason)
        self.module, self.reason = module, reason


def of_exit(returncode: int | None, timeout_s: float, log: str) -> Verdict:
    """A worker that wrote no report: out of time, or killed or exited (its log's tail says how)."""
    if returncode is None:
        return Verdict("timeout", f"the worker did not finish within {timeout_s:g} s")
    if returncode < 0:
        try:
            how = f"the worker was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"the worker was killed by signal {-returncode}"
    else:
        how = f"the worker exited with status {returncode} before writing its result"
    tail = log.strip()[-1500:]
    return Verdict("crash", how + (f"; its last output:\n{tail}" if tail else ""))


def of_unusable_report(problem: str) -> Verdict:
    """The candidate shares its worker's process and can leave a forged or torn report."""
    return Verdict("crash", f"the worker's record is unusable ({problem})")


def of_floor(time_ms: float, floor_ms: float | None, max_fraction: float) -> Verdict | None:
    """A time below what the device can do for the task's bytes and FLOPs cannot be honest."""
    if not floor_ms or floor_ms / time_ms <= max_fraction:
        return None
    return Verdict(
        "rejected",
        f"its time {time_ms:.4g} ms is below this device's floor of {floor_ms:.4g} ms for the task's "
        f"bytes and FLOPs ({floor_ms / time_ms:.1f}x the measured ceiling): the timing cannot be honest",
    )
