"""EvalResult: the record of one candidate's evaluation, as agents, MLflow and the CLI see it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness import serial
from harness.evaluate.verdict import VERDICTS, shorten

__all__ = ["VERDICTS", "EvalResult", "shorten"]


@dataclass
class EvalResult:
    task: str
    platform: str
    verdict: str
    reason: str = ""
    time_ms: float | None = None
    # Host time of one call (timing.Timing.host_ms): when it is near time_ms on a GPU, the time
    # measured the host's launching, not the kernels. The same for each baseline.
    host_ms: float | None = None
    # The 20th and 80th percentiles of the timed calls (advisory, like time_ms): the timing's spread.
    time_p20_ms: float | None = None
    time_p80_ms: float | None = None
    time_quantiles_ms: list[float] = field(default_factory=list)  # 0%, 5%, ..., 100% of the timed calls
    checks_skipped: dict[str, str] = field(default_factory=dict)  # check name -> why it could not run here
    baselines: dict[str, float] = field(default_factory=dict)  # baseline name -> its median ms
    baselines_host_ms: dict[str, float] = field(default_factory=dict)  # baseline name -> host ms of a call
    speedup_vs_eager: float | None = None
    # Eager and the kernel timed in alternating rounds by the referee: the 20th and 80th percentiles
    # of the rounds' ratios, whose median is speedup_vs_eager.
    speedup_vs_eager_p20: float | None = None
    speedup_vs_eager_p80: float | None = None
    speedup_vs_compile: float | None = None
    speedups: dict[str, float] = field(default_factory=dict)  # baseline name -> its time / the kernel's
    # The fastest baseline timed on the task (eager, compile, max-autotune, Liger, FlashInfer, ...) and
    # the speedup over it: a kernel is credited with beating the best available only when this is > 1.
    best_baseline: str | None = None
    speedup_vs_best: float | None = None
    # Each baseline as the reference's worker timed it, before it was carried to the kernel's moment
    # through eager's time beside the kernel (the referee's rounds); empty where it was not.
    baselines_reference: dict[str, float] = field(default_factory=dict)
    baselines_skipped: dict[str, str] = field(default_factory=dict)  # baseline name -> why it was not timed
    baselines_setup_s: dict[str, float] = field(default_factory=dict)  # baseline name -> build/compile seconds
    sol_fraction: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    cached_build: bool = False
    profile: dict[str, Any] = field(default_factory=dict)  # top kernels by self time, when asked for
    # The bound the outputs were judged by (tolerance.py): {"basis": "fp64", ...} or {"basis": "eager"}.
    tolerance: dict[str, Any] = field(default_factory=dict)
    torch_ops_rule: str = "forbid"  # evaluate.torch_ops when it was judged
    torch_ops: list[str] = field(default_factory=list)  # PyTorch compute its forward ran (under allow)
    # Whose clock timed the kernel and who judged its calls: "referee", the harness's process, outside
    # the candidate's reach (referee.py). Records from before the referee say "worker".
    timed_by: str = "referee"
    calls_checked: int = 0  # calls whose outputs the referee had judged (every call it made)
    # Where the kernel's CPU time went, sampled by perf events from the referee's process (census.py):
    # the share of samples by library ("own", "pytorch", "python", ...) and their number ("samples");
    # on the host, "eager_samples": eager's brackets, sampled by the same events (they slow what they watch).
    census: dict[str, float] = field(default_factory=dict)

    DERIVED = ("correct",)  # serial.to_dict writes it beside the fields

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    def to_dict(self) -> dict[str, Any]:
        return serial.to_dict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        return serial.from_dict(cls, data)

    def summary(self) -> str:
        """One line for prompts and logs: the time, and the speedup over each baseline timed."""
        if self.correct:
            speeds = ", ".join(f"{value:.3g}x vs {name}" for name, value in self.speedups.items())
            return f"correct ({self.time_ms:.4g} ms{', ' + speeds if speeds else ''})"
        return f"{self.verdict}: {self.reason}"
