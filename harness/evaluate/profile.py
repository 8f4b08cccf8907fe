"""The analyst's profile of a correct candidate: its top ops and kernels by self time."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from harness.devices import Device

_PROFILE_CALLS = 5
_PROFILE_TOP = 10


def top_kernels(model, inputs: list[Any], device: Device) -> dict:
    """The top ops and kernels by self time over a few calls: device time of each kernel where the
    device runs asynchronously; host time on a CPU, where a ctypes kernel is no op and its time
    shows as the self time of a `ModelNew.forward` range."""
    from torch.profiler import profile, record_function

    on_device = device.profile_kind == "device"
    with profile(activities=device.profiler_activities()) as profiler:
        for _ in range(_PROFILE_CALLS):
            # On a GPU the range would be a device event of its own, counting its kernels twice.
            with nullcontext() if on_device else record_function("ModelNew.forward"):
                model(*inputs)
        device.synchronize()
    # On a GPU an op's self device time repeats its kernels' times: count the kernels only.
    kind, attr = device.profiled_event_type, "self_device_time_total" if on_device else "self_cpu_time_total"
    events = sorted(
        (e for e in profiler.key_averages() if e.device_type == kind and getattr(e, attr) > 0),
        key=lambda e: getattr(e, attr),
        reverse=True,
    )
    total_us = sum(getattr(e, attr) for e in events)
    top = [
        {"name": e.key, "calls": e.count, "self_us": getattr(e, attr), "share": getattr(e, attr) / total_us}
        for e in events[:_PROFILE_TOP]
    ]
    return {"time": device.profile_kind, "forward_calls": _PROFILE_CALLS, "total_us": total_us, "top": top}
