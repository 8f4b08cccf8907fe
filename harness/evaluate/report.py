"""The worker's report to its parent (result.json): one typed record, written by the worker and
read back by the parent with every field's type checked (serial.from_dict), since the candidate
runs in the worker's process and can forge the file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness import serial
from harness.evaluate.verdict import VERDICTS


@dataclass
class WorkerReport:
    verdict: str
    reason: str = ""
    env: dict[str, Any] = field(default_factory=dict)
    wall_s: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    # A candidate's (diagnosis: its process could have written anything): the checks it passed in
    # the worker, what it ran.
    checks_skipped: dict[str, str] = field(default_factory=dict)
    torch_ops: list[str] = field(default_factory=list)  # PyTorch compute ops its forward called
    cached_build: bool = False
    profile: dict[str, Any] = field(default_factory=dict)
    # A reference's: each baseline's time by the baseline's name, and the device's ceilings.
    baselines: dict[str, float] = field(default_factory=dict)
    baselines_host_ms: dict[str, float] = field(default_factory=dict)
    baselines_skipped: dict[str, str] = field(default_factory=dict)
    baselines_setup_s: dict[str, float] = field(default_factory=dict)
    tolerance: list[dict[str, Any]] = field(default_factory=list)  # each check seed's bound (tolerance.py)
    ceilings: dict[str, Any] | None = None
    io_bytes: int | None = None  # a call's inputs and outputs: the floor's bytes where the task states none
    harness_fault: str | None = None  # a standard-library module the worker could not import
    profiler_failure: str | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS + ("profiled",):
            raise serial.RecordError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    def to_json(self) -> str:
        return json.dumps(serial.to_dict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerReport:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise serial.RecordError(f"it is not JSON ({exc})") from exc
        return serial.from_dict(cls, data, "the report")
