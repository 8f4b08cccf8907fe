"""Baselines: each file here is one, found by its name (conf/platform/*.yaml lists which to time).

A file defines `BASELINE = Baseline(...)`: what it needs installed and how it turns the task's
reference model into a callable with the reference's signature, or raises NotApplicable with a
reason that lands in the result. The reference worker times every baseline through the one timing
module, under torch.no_grad, after checking its output against the reference's.

Adding one (TensorRT-LLM, say) is one more file; none ships for TensorRT-LLM, whose wheels (over a
gigabyte) could not be installed on the GPU machine this project ran on.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.errors import ForgeBenchError
from harness.evaluate.verdict import shorten


class NotApplicable(Exception):
    """This baseline cannot run this task; the message says why (it is shown in the result)."""


@dataclass(frozen=True)
class Sample:
    """What a baseline may look at to build itself: the model and one check seed's inputs."""

    model: torch.nn.Module
    inputs: list[Any]
    device: torch.device


@dataclass(frozen=True)
class Baseline:
    name: str
    description: str
    # A callable, or variants of one, most likely first: the first whose output matches is timed.
    build: Callable[[Sample], Callable[..., Any] | list[Callable[..., Any]]]
    # Importable modules it needs; when one is missing the baseline is skipped, never an error.
    needs: tuple[str, ...] = ()
    devices: tuple[str, ...] | None = None  # the torch device types it runs on; None: any
    # Whether its output is checked against the reference's before it is timed.
    checked: bool = True

    def missing(self, device: torch.device) -> str | None:
        if self.devices is not None and device.type not in self.devices:
            return f"runs on {', '.join(self.devices)} only, not {device.type}"
        absent = [m for m in self.needs if importlib.util.find_spec(m) is None]
        if absent:
            return f"needs {', '.join(absent)}, which is not installed (pip install 'forgebench[gpu]')"
        return None


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def load(name: str) -> Baseline:
    if name not in available():
        raise ForgeBenchError(
            f"baseline '{name}' has no file harness/evaluate/baselines/{name}.py; "
            f"the baselines are {', '.join(available())} (fix platform.baselines)."
        )
    return importlib.import_module(f"{__name__}.{name}").BASELINE


@dataclass
class BaselineTimes:
    """Per baseline: median ms when timed, else why not; seconds spent building (compiling); host ms
    a call (`timing.Timing.host_ms`)."""

    ms: dict[str, float] = field(default_factory=dict)
    host_ms: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    setup_s: dict[str, float] = field(default_factory=dict)


def _first_matching(baseline: Baseline, sample: Sample, check: Callable[[Any], str | None]) -> Callable[..., Any]:
    """The baseline's callable, called once: a lazy compilation happens here, counted as setup."""
    built = baseline.build(sample)
    variants = built if isinstance(built, list) else [built]
    if not baseline.checked:
        return variants[0]
    mismatches = []
    for fn in variants:
        try:
            mismatch = check(fn)
        except NotApplicable:
            raise
        except Exception as exc:  # this reading of the task's op does not run here; the next may
            mismatch = shorten(f"it raised {type(exc).__name__}: {exc}", 300)
        if mismatch is None:
            return fn
        mismatches.append(mismatch)
    raise NotApplicable(f"its output differs from the reference's: {mismatches[0]}")


def measure_all(
    names: list[str],
    sample: Sample,
    check: Callable[[Any], str | None],
    timing_sets: list[list[Any]],
    timing_kwargs: dict,
) -> BaselineTimes:
    """Build, check and time each named baseline; a baseline that fails is skipped with its reason."""
    from harness.evaluate import timing

    times = BaselineTimes()
    for name in names:
        baseline = load(name)
        reason = baseline.missing(sample.device)
        if reason:
            times.skipped[name] = reason
            continue
        start = time.perf_counter()
        try:
            torch._dynamo.reset()  # each compiled baseline starts from no earlier compilation
            fn = _first_matching(baseline, sample, check)
            times.setup_s[name] = time.perf_counter() - start
            measured = timing.measure(fn, timing_sets, sample.device, **timing_kwargs)
            times.ms[name], times.host_ms[name] = measured.median_ms, measured.host_ms
        except NotApplicable as exc:
            times.skipped[name] = str(exc)
        except Exception as exc:  # a baseline that breaks on a task loses its column, not the task
            times.skipped[name] = shorten(f"failed: {type(exc).__name__}: {exc}", 600)
    return times
