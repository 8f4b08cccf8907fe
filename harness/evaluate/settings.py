"""EvalSettings: how candidates are checked and timed, with the range each setting may take (the
schema of the configuration's `evaluate` group)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from harness.errors import require


@dataclass
class EvalSettings:
    timeout_s: float = 300.0
    # The reference worker runs once per task and compiles every baseline (max-autotune: minutes).
    reference_timeout_s: float = 1800.0
    memory_gb: float | None = 16.0
    check_seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    timing_seeds: list[int] = field(default_factory=lambda: [101, 102, 103])
    init_seed: int = 0
    budget_ms: float = 300.0
    warmup_ms: float = 30.0
    # On a GPU, the reference worker's baselines (eager, torch.compile) are timed with the stream
    # waiting before each timed call, so their launches queue ahead of it and the events time GPU
    # work, not host time (timing.measure's gpu_lead); without it a small task's torch.compile is
    # timed at its wrapper's host time (60-150 us a call on the H200). They are our code; the
    # candidate is timed by the referee (referee.py), with eager beside it, on the host's clock.
    baseline_gpu_lead: bool = True
    # Nsight Compute metrics of each profiled correct candidate (the analyst's), on a GPU whose ncu
    # reads the counters (harness/evaluate/ncu.py); where it cannot, the profile says why.
    ncu: bool = True
    # Whether a candidate may keep some PyTorch compute ops and write kernels for the rest, as
    # KernelBench grades it ("allow": the ops it ran are recorded, and one that runs no kernel of
    # its own is still rejected), or must do all the computation itself ("forbid": a captured
    # task is the op, so calling it is not a kernel). Unset, the suite's `torch_ops` decides
    # (the KernelBench suites allow, as KernelBench does), else forbid.
    torch_ops: Optional[str] = None  # noqa: UP045 (OmegaConf reads Optional at runtime)
    # What a candidate's output is compared with: "fp64", the reference run in fp64 with a bound
    # per element derived from eager's own error (tolerance.py); "fixed", eager's output within
    # the dtype's atol + rtol, as before.
    tolerance: str = "fp64"

    def __post_init__(self):
        require(
            self,
            "evaluate",
            {
                "timeout_s": (self.timeout_s > 0, "a number of seconds above 0"),
                "reference_timeout_s": (self.reference_timeout_s > 0, "a number of seconds above 0"),
                "memory_gb": (self.memory_gb is None or self.memory_gb > 0, "a number of GB above 0, or null"),
                "check_seeds": (len(self.check_seeds) > 0, "a list of at least one seed"),
                "timing_seeds": (len(self.timing_seeds) > 0, "a list of at least one seed"),
                "budget_ms": (self.budget_ms > 0, "a number of milliseconds above 0"),
                "warmup_ms": (self.warmup_ms >= 0, "a number of milliseconds, 0 or more"),
                "torch_ops": (self.torch_ops in (None, "forbid", "allow"), "forbid or allow"),
                "tolerance": (self.tolerance in ("fp64", "fixed"), "fp64 or fixed"),
            },
        )


def for_run(cfg) -> EvalSettings:
    """The composed config's evaluate settings, with the suite's torch_ops rule where none is set."""
    from dataclasses import replace

    from omegaconf import OmegaConf

    settings = OmegaConf.to_object(cfg.evaluate)
    if settings.torch_ops is None:
        settings = replace(settings, torch_ops=cfg.suite.get("torch_ops") or "forbid")
    return settings
