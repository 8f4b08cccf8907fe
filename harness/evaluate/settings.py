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
    # Calls after timing on inputs drawn then from os.urandom, outputs checked in the worker against
    # the reference: on a GPU they are profiled to find work hidden from the timer
    # (candidate_run._hidden_work). 0 turns that check off.
    unseen_calls: int = 2
    init_seed: int = 0
    budget_ms: float = 300.0
    warmup_ms: float = 30.0
    # On a GPU, let the stream wait before each timed call so its launches queue ahead of it and
    # the events time GPU work, not host time (timing.measure's gpu_lead). A candidate that spins
    # on the host lengthens its own lead and can run side-stream work during it, unseen by the
    # events. The hidden-work check (candidate_run._hidden_work) compares all streams' work with the
    # timed time and catches that (tests/gpu: joins_side_stream_triton, on the H200). On since every
    # call runs under the op recorder (candidate_run.Watched): its ~13 us of host time per call and op
    # is the harness's, and without the lead a small kernel was timed at it (on the H200:
    # three resnet50 batch-norm kernels 2-5x slower).
    gpu_lead: bool = True
    # The same lead for the baselines (eager, torch.compile). They are our code, so the hole above
    # does not apply; without it a small task's baseline is timed at its host time (compile's
    # wrapper: 60-150 us a call on the H200). A candidate timed
    # without the lead is then compared with its baselines' GPU time: the speedup errs low, not high.
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
    # On a device whose memory another process can open (CUDA IPC), a candidate whose reference
    # outputs (all check calls together) reach this many MB hands its outputs to the judge in
    # device memory instead of writing them to a file for it to read (handover.py); null never.
    device_outputs_mb: Optional[float] = 64.0  # noqa: UP045

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
                "unseen_calls": (self.unseen_calls >= 0, "a whole number, 0 or more"),
                "budget_ms": (self.budget_ms > 0, "a number of milliseconds above 0"),
                "warmup_ms": (self.warmup_ms >= 0, "a number of milliseconds, 0 or more"),
                "torch_ops": (self.torch_ops in (None, "forbid", "allow"), "forbid or allow"),
                "tolerance": (self.tolerance in ("fp64", "fixed"), "fp64 or fixed"),
                "device_outputs_mb": (
                    self.device_outputs_mb is None or self.device_outputs_mb >= 0,
                    "a number of MB, 0 or more, or null",
                ),
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
