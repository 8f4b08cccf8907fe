"""The e2e record: what one model run found, as one versioned dataclass written by the model run
(model_run.py), completed by `forgebench e2e` (e2e.py) and read by the table (e2e_report.py), the
bundle (bundle.py) and the leaderboard (leaderboard/e2e.py), all through serial.py. Imports no
torch: the leaderboard reads it.

A record of an older shape (a plain dict with no `version`, no `modes`) is read in one place,
`E2EResult.read`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

from harness import serial
from harness.amdahl import realization

# 2: execution modes, per-kernel figures, realization; 1 (no `version` key): eager only.
VERSION = 2


class Mode(enum.StrEnum):
    """How the model runs, patched or not (docs/e2e-modes.md)."""

    EAGER = "eager"  # PyTorch eager; the patched model is the graph pass run as FX code
    CUDA_GRAPH = "cuda_graph"  # the whole forward captured once in a CUDA graph and replayed
    COMPILE = "compile"  # torch.compile, default mode; the kernels opaque ops to Inductor
    COMPILE_CUDA_GRAPH = "compile_cuda_graph"  # torch.compile(mode="reduce-overhead")


class GuardDecision(enum.StrEnum):
    """What the guard decided for one kernel (guard.py); in a mode, what it decided there."""

    KEPT = "kept"
    INCORRECT_IN_MODEL = "incorrect_in_model"
    SLOWER_IN_PLACE = "slower_in_place"
    SLOWER_IN_MODEL = "slower_in_model"
    NEVER_CALLED = "never_called"
    NOT_INTEGRABLE = "not_integrable"
    FAILED_TO_LOAD = "failed_to_load"
    REFUSED_IN_MODE = "refused_in_mode"  # the kernel breaks the mode (a sync or an allocation under capture)


@dataclass
class Decision:
    task_id: str
    decision: GuardDecision
    reason: str = ""
    calls_checked: int = 0
    op_ms: float | None = None
    kernel_ms: float | None = None
    in_place_speedup: float | None = None
    figures: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.decision = GuardDecision(self.decision)

    @property
    def kept(self) -> bool:
        return self.decision == GuardDecision.KEPT


@dataclass
class ModeResult:
    """The model in one mode, as it is and with the kernels the guard kept in that mode. `timings`
    holds three figures timed side by side: `eager`, `base` (the mode, no kernel) and `patched`."""

    mode: Mode
    refused: str | None = None  # why the mode could not run here: one sentence
    kept: list[str] = field(default_factory=list)
    decisions: dict[str, GuardDecision] = field(default_factory=dict)  # each kernel weighed in the mode
    reasons: dict[str, str] = field(default_factory=dict)
    timings: dict[str, dict] = field(default_factory=dict)
    hits_per_forward: dict[str, int] = field(default_factory=dict)
    versus_base: str = ""  # faster | tie | slower, by the spreads (guard.versus)
    predicted_speedup: float | None = None  # Amdahl over the kernels kept in the mode
    agreement: dict = field(default_factory=dict)  # the patched output against eager's

    def _ms(self, key: str) -> float | None:
        return (self.timings.get(key) or {}).get("median_ms")

    @property
    def speedup(self) -> float | None:
        """The patched model over the same mode with no kernel."""
        base, patched = self._ms("base"), self._ms("patched")
        return base / patched if base and patched else None

    @property
    def base_vs_eager(self) -> float | None:
        """The mode, no kernel, over eager timed beside it: what the mode alone gives."""
        eager, base = self._ms("eager"), self._ms("base")
        return eager / base if eager and base else None

    @property
    def realization(self) -> float | None:
        """The measured gain over the predicted one: (speedup - 1) / (predicted - 1); None where
        Amdahl predicts no gain worth the name (under 0.5%)."""
        return realization(self.speedup, self.predicted_speedup)


@dataclass
class KernelFigures:
    """One kernel's speedups side by side: isolated (the suite's task), in place (the guard's, on
    the model's activations) and in the model (the patched model with it switched off, against with
    it on, in eager mode: its op's time there estimated as op_ms x calls)."""

    task_id: str
    isolated_speedup: float | None = None
    in_place_speedup: float | None = None
    in_model_speedup: float | None = None
    in_model_saving_ms: float | None = None  # a forward
    kept_in: list[Mode] = field(default_factory=list)


@dataclass
class E2EResult:
    version: int = VERSION
    model: str = ""
    model_spec: str = ""
    source_run: str | None = None
    run_id: str | None = None
    tasks_of_model: int = 0
    tasks_without_kernel: list[str] = field(default_factory=list)
    request: dict = field(default_factory=dict)
    wall_s: float | None = None
    traced_as: str = ""  # the whole model in one trace, or each distinct block once (blocks.py)
    aten_calls_per_forward: int = 0
    graph_calls_per_forward: int = 0
    timings: dict[str, dict] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    hits_per_forward: dict[str, int] = field(default_factory=dict)
    unmatched_calls: int = 0
    patched_is_eager: bool = False
    phases_vs_eager: dict[str, str] = field(default_factory=dict)
    decode_steps: int = 0
    graph_only_agreement: dict = field(default_factory=dict)
    reinplace_error: str | None = None
    tokens_match: bool | None = None
    max_output_error: float | None = None
    mean_output_error: float | None = None
    output_mismatch: str | None = None
    patched_vs_eager: str = ""
    fallbacks: dict[str, int] = field(default_factory=dict)
    fallback_errors: dict[str, str] = field(default_factory=dict)
    patch_overhead_ms_per_forward: float = 0.0
    patch_overhead_us_per_call: float = 0.0
    calls_at_signature_per_forward: dict[str, int] = field(default_factory=dict)
    predicted_speedup: float = 1.0
    predicted_speedup_in_place: float = 1.0
    share_of_time_replaced: float = 0.0
    settling: list[dict] = field(default_factory=list)
    modes: dict[str, ModeResult] = field(default_factory=dict)
    kernels: list[KernelFigures] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    driver: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return serial.to_dict(self)

    @classmethod
    def read(cls, data: dict | E2EResult) -> E2EResult:
        """A record from e2e.json, of this version or an older shape (no modes: its eager figures,
        and its torch.compile ones where it has them, become the modes)."""
        if isinstance(data, E2EResult):
            return data
        data = {k: v for k, v in data.items() if not _absent(v)}
        if "modes" not in data:
            data["modes"] = _modes_of_old_record(data)
        return serial.from_dict(cls, data)

    def mode(self, mode: Mode | str) -> ModeResult | None:
        return self.modes.get(Mode(mode).value)

    @property
    def verified_modes(self) -> list[Mode]:
        """The modes the guard weighed the kernels in (a mode refused here is not one)."""
        return [m.mode for m in self.modes.values() if not m.refused]

    @property
    def eager_speedup(self) -> float:
        return self.timings["eager"]["median_ms"] / self.timings["patched_eager"]["median_ms"]


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def _modes_of_old_record(data: dict) -> dict:
    """A record of before modes: its patched model was weighed in eager mode; its torch.compile
    figures, where timed, were compile + the eager-kept kernels beside compile alone."""
    t = data.get("timings") or {}
    kept = [d["task_id"] for d in data.get("decisions", []) if d.get("decision") == "kept"]
    found = {}
    if "eager" in t and "patched_eager" in t:
        found["eager"] = {
            "mode": "eager",
            "kept": kept,
            "timings": {"eager": t["eager"], "base": t["eager"], "patched": t["patched_eager"]},
            "hits_per_forward": data.get("hits_per_forward") or {},
            "versus_base": data.get("patched_vs_eager", ""),
            "predicted_speedup": data.get("predicted_speedup"),
        }
    if "compile" in t and "patched_compile" in t:
        eager = t.get("eager_beside_compile", t.get("eager"))
        found["compile"] = {
            "mode": "compile",
            "kept": kept,
            "timings": {"eager": eager, "base": t["compile"], "patched": t["patched_compile"]},
            "hits_per_forward": data.get("patched_compile_hits_per_forward") or {},
            "versus_base": data.get("patched_compile_vs_compile", ""),
        }
    return found
