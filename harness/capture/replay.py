"""Time each captured call by replaying it alone on fresh random inputs of the recorded shapes,
dtypes and strides, through the project's one timing module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.capture.inputs import draw
from harness.capture.record import CallGroup, TensorSpec, ValueRange
from harness.evaluate import timing


@dataclass(frozen=True)
class ReplaySettings:
    budget_ms: float = 100.0  # timed calls per group fill this much time
    warmup_ms: float = 20.0
    input_sets: int = 2  # distinct random input sets the timed calls rotate through


def _buffer(spec: TensorSpec, values: ValueRange) -> torch.Tensor:
    """A flat buffer as long as the strides reach, filled like the captured input was."""
    return draw((spec.span,), spec.dtype, values.low, values.high, values.mean, values.std)


def _views(group: CallGroup, buffers: list[torch.Tensor]) -> list[torch.Tensor]:
    return [b.as_strided(s.shape, s.stride) for b, s in zip(buffers, group.inputs)]


def time_group(group: CallGroup, device: torch.device, settings: ReplaySettings) -> float:
    """Median milliseconds of one call of the group on `device`.

    The timer refreshes the working buffers before every call; the op reads them through
    views made once, so a broadcast or transposed input keeps the layout the model gave it."""
    with device:
        sets = [[_buffer(s, v) for s, v in zip(group.inputs, group.values)] for _ in range(settings.input_sets)]
        working = timing.clone_inputs(sets[0])
    views = _views(group, working)
    result = timing.measure(
        lambda *_: group.call(views),
        sets,
        device,
        budget_ms=settings.budget_ms,
        warmup_ms=settings.warmup_ms,
        working=working,
    )
    return result.median_ms


def time_groups(
    groups: list[CallGroup], device: torch.device, settings: ReplaySettings, progress: Callable[[str], None]
) -> None:
    """Set each group's time_ms, or its `untimed` reason when the call cannot be replayed on
    random inputs (an op that needs structure random values lack)."""
    for i, group in enumerate(groups):
        progress(f"timing {i + 1}/{len(groups)}: {group.name}")
        try:
            group.time_ms = time_group(group, device, settings)
        except (RuntimeError, ValueError, IndexError) as exc:
            group.untimed = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()


def time_workload(run: Callable[[], object], device: torch.device, settings: ReplaySettings) -> float:
    """Median milliseconds of the whole forward, unrecorded: the replay total's yardstick."""
    return timing.measure(
        lambda: run(), [[]], device, budget_ms=settings.budget_ms * 5, warmup_ms=0.0, min_runs=3
    ).median_ms
