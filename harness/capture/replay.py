"""Time each captured call by replaying it alone on fresh random inputs of the recorded shapes,
dtypes and strides, through the project's one timing module."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness import devices
from harness.capture.inputs import draw
from harness.capture.record import CallGroup, TensorSpec, ValueRange
from harness.errors import ForgeBenchError
from harness.evaluate import timing


@dataclass(frozen=True)
class ReplaySettings:
    budget_ms: float = 100.0  # timed calls per group fill this much time
    warmup_ms: float = 20.0
    input_sets: int = 2  # distinct random input sets the timed calls rotate through
    # Processes each group is timed in (this one and fresh ones); its time is the fastest of them.
    # cuDNN and cuBLAS choose algorithms per process: one GEMM replayed at 13, 19 and 112 us in
    # three processes on the H200, and a conv's median of three moved 10.6% between two captures
    # as its processes split 2:1 and then 0:3 between a 27.6 and a 30.7 us algorithm. The fastest
    # is the time with the library's good choice, and no busy neighbour can raise it.
    processes: int = 1


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
            devices.of(device).empty_cache()


def time_groups_in_processes(
    groups: list[CallGroup], device: torch.device, settings: ReplaySettings, progress: Callable[[str], None]
) -> None:
    """time_groups here, then in `settings.processes - 1` fresh processes; each group keeps the
    fastest of its times (`times_ms` holds them all, this process's first)."""
    time_groups(groups, device, settings, progress)
    runs = [[g.time_ms for g in groups]]
    if settings.processes > 1:
        payload = pickle.dumps((str(device), settings, [_portable(g) for g in groups]))
        for number in range(2, settings.processes + 1):
            progress(f"timing every group again in a fresh process ({number}/{settings.processes})")
            done = subprocess.run(
                [sys.executable, "-c", "from harness.capture.replay import child_main; child_main()"],
                input=payload,
                stdout=subprocess.PIPE,
                check=False,
            )
            if done.returncode != 0:
                raise ForgeBenchError(
                    f"capture: timing in a fresh process failed (exit {done.returncode}; its output is above); "
                    "rerun, or pass --timing-processes 1."
                )
            runs.append(json.loads(done.stdout))
    for i, group in enumerate(groups):
        group.times_ms = [run[i] for run in runs if run[i] is not None]
        group.time_ms = min(group.times_ms) if group.times_ms else None
        group.untimed = "" if group.times_ms else group.untimed


def _portable(group: CallGroup) -> tuple:
    """A group as another process can unpickle it: its op by name (op objects do not pickle)."""
    op = group.op
    return (op.namespace, op.overloadpacket.__name__, op._overloadname), dataclasses.replace(group, op=None)


def child_main() -> None:
    """In a fresh process: time the groups pickled on stdin, print their times (JSON) on stdout."""
    device, settings, portable = pickle.loads(sys.stdin.buffer.read())
    groups = []
    for (namespace, packet, overload), group in portable:
        group.op = getattr(getattr(getattr(torch.ops, namespace), packet), overload)
        group.time_ms, group.untimed = None, ""
        groups.append(group)
    torch.backends.cudnn.benchmark = True  # as in the capture's own process
    with torch.no_grad():
        time_groups(groups, torch.device(device), settings, lambda message: print(message, file=sys.stderr))
    print(json.dumps([g.time_ms for g in groups]))


def time_workload(run: Callable[[], object], device: torch.device, settings: ReplaySettings) -> float:
    """Median milliseconds of the whole forward, unrecorded: the replay total's yardstick."""
    return timing.measure(
        lambda: run(), [[]], device, budget_ms=settings.budget_ms * 5, warmup_ms=0.0, min_runs=3
    ).median_ms
