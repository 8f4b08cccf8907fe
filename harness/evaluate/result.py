"""EvalResult: the record of one candidate's evaluation, as agents, MLflow and the CLI see it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("correct", "incorrect", "compile_error", "runtime_error", "timeout", "crash", "rejected")


def shorten(text: str, limit: int = 2000) -> str:
    """A reason short enough to record: its head and its tail (where an error's cause usually is)."""
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2 :]


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
    # On a GPU, how long one call keeps the GPU busy on all its streams (CUPTI, timing.profiled_call):
    # near time_ms for honest work; far above it, work escaped the timer and the verdict is rejected.
    gpu_busy_ms: float | None = None
    # The 20th and 80th percentiles of the timed calls (advisory, like time_ms): the timing's spread.
    time_p20_ms: float | None = None
    time_p80_ms: float | None = None
    time_quantiles_ms: list[float] = field(default_factory=list)  # 0%, 5%, ..., 100% of the timed calls
    checks_skipped: dict[str, str] = field(default_factory=dict)  # check name -> why it could not run here
    baselines: dict[str, float] = field(default_factory=dict)  # "<baseline>_ms": median ms
    baselines_host_ms: dict[str, float] = field(default_factory=dict)  # "<baseline>_host_ms": host ms a call
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    speedups: dict[str, float] = field(default_factory=dict)  # baseline name -> its time / the kernel's
    baselines_skipped: dict[str, str] = field(default_factory=dict)  # baseline name -> why it was not timed
    baselines_setup_s: dict[str, float] = field(default_factory=dict)  # baseline name -> build/compile seconds
    sol_fraction: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    cached_build: bool = False
    profile: dict[str, Any] = field(default_factory=dict)  # top kernels by self time, when asked for

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    def to_dict(self) -> dict[str, Any]:
        return {"correct": self.correct, **asdict(self)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def summary(self) -> str:
        """One line for prompts and logs."""
        if self.correct:
            speed = f"{self.time_ms:.4g} ms, {self.speedup_vs_eager:.3g}x vs eager"
            return f"correct ({speed})"
        return f"{self.verdict}: {self.reason}"
