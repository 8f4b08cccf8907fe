"""Evaluate a candidate against its task: reference and candidate each in a sandboxed worker."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from harness.errors import ForgeBenchError
from harness.evaluate.checks import compare
from harness.evaluate.result import EvalResult
from harness.evaluate.sandbox import describe_exit, run_worker
from harness.platforms.base import Platform
from harness.tasks import Task

__all__ = ["EvalResult", "Evaluator", "EvalSettings"]


@dataclass
class EvalSettings:
    timeout_s: float = 300.0
    memory_gb: float | None = 16.0
    check_seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    timing_seeds: list[int] = field(default_factory=lambda: [101, 102, 103])
    init_seed: int = 0
    budget_ms: float = 300.0
    warmup_ms: float = 30.0


class Evaluator:
    """Evaluates candidates for one platform; caches reference outputs per task for its lifetime."""

    def __init__(self, platform: Platform, settings: EvalSettings, work_dir: Path, cache_dir: Path):
        reason = platform.unavailable_reason()
        if reason:
            raise ForgeBenchError(reason)
        self.platform, self.settings = platform, settings
        self.work_dir, self.cache_dir = Path(work_dir).resolve(), Path(cache_dir).resolve()
        self._expected: dict[str, object] = {}

    def _request(self, task: Task, mode: str, folder: Path, **extra) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        s = self.settings
        request = {
            "mode": mode, "reference_path": str(task.reference_path), "device": self.platform.device,
            "init_seed": s.init_seed, "check_seeds": s.check_seeds, "timing_seeds": s.timing_seeds,
            "timing": {"budget_ms": s.budget_ms, "warmup_ms": s.warmup_ms},
            "baselines": self.platform.baselines, "outputs_path": str(folder / "outputs.pt"),
            "result_path": str(folder / "result.json"), **extra,
        }
        path = folder / "request.json"
        path.write_text(json.dumps(request, indent=1))
        return path

    def _run(self, request: Path, folder: Path) -> tuple[dict | None, str]:
        s = self.settings
        memory_gb = s.memory_gb if self.platform.limit_address_space else None
        exit_ = run_worker(request, folder, s.timeout_s, memory_gb, self.platform.worker_env(self.cache_dir))
        result_path = folder / "result.json"
        if exit_.returncode is None:
            return None, f"timeout: the worker did not finish within {s.timeout_s:g} s"
        if exit_.returncode == 0 and result_path.is_file():
            return json.loads(result_path.read_text()), ""
        tail = exit_.log.strip()[-1500:]
        return None, f"{describe_exit(exit_.returncode)}" + (f"; its last output:\n{tail}" if tail else "")

    def expected_outputs(self, task: Task) -> object:
        """The reference's outputs on the check seeds, computed in a worker of their own."""
        if task.id not in self._expected:
            folder = self.work_dir / "reference" / task.id
            record, failure = self._run(self._request(task, "reference", folder), folder)
            if record is None or record.get("verdict") != "correct":
                reason = failure or record.get("reason", "")
                raise ForgeBenchError(f"task '{task.id}': its reference did not run ({reason}); fix {task.reference_path}.")
            self._expected[task.id] = torch.load(folder / "outputs.pt", weights_only=True)
        return self._expected[task.id]

    def evaluate(self, task: Task, candidate_source: str) -> EvalResult:
        expected = self.expected_outputs(task)
        digest = hashlib.sha256(candidate_source.encode()).hexdigest()[:16]
        folder = self.work_dir / "candidates" / task.id / f"{digest}-{time.time_ns()}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "candidate.py").write_text(candidate_source)
        started = time.perf_counter()
        record, failure = self._run(self._request(task, "candidate", folder, candidate_path=str(folder / "candidate.py")), folder)
        if record is None:
            verdict = "timeout" if failure.startswith("timeout") else "crash"
            return EvalResult(task.id, self.platform.name, verdict, reason=failure,
                              phases={"wall_s": time.perf_counter() - started})
        result = self._result_from(task, record, expected, folder)
        result.phases["wall_s"] = time.perf_counter() - started
        return result

    def _result_from(self, task: Task, record: dict, expected: object, folder: Path) -> EvalResult:
        result = EvalResult(task.id, self.platform.name, record["verdict"], reason=record.get("reason", ""),
                            baselines=record.get("baselines", {}), phases=record.get("phases", {}),
                            env=record.get("env", {}), cached_build=record.get("cached_build", False))
        if not result.correct:
            return result
        actual = torch.load(folder / "outputs.pt", weights_only=True)
        for seed, want, got in zip(self.settings.check_seeds, expected, actual):
            mismatch = compare(want, got, task.tolerance)
            if mismatch:
                result.verdict, result.reason = "incorrect", f"{mismatch.reason} (input seed {seed})"
                return result
        result.time_ms = record["time_ms"]
        eager, compiled = result.baselines.get("eager_ms"), result.baselines.get("compile_ms")
        result.speedup_vs_eager = eager / result.time_ms if eager else None
        result.speedup_vs_compile = compiled / result.time_ms if compiled else None
        return result
