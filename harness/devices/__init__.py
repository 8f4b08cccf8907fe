"""Devices: what differs between a CPU and a GPU, behind one adapter the evaluator calls.

A platform's YAML names its device (`device: cuda`); the evaluator hands that name to each worker,
which loads the adapter here before any candidate code runs. Adding a device (ROCm, Apple MPS) is a
module in this package defining `DEVICE`, a platform YAML naming it, and its platform's build file:
the evaluator does not change (docs/devices.md).
"""

from __future__ import annotations

import importlib
import pkgutil

import torch

from harness.devices.base import Device

__all__ = ["Device", "load", "names"]

_LOADED: dict[str, Device] = {}


def names() -> list[str]:
    """Every device this package has an adapter for."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in ("base", "cuda_ipc"))


def load(name: str) -> Device:
    """The adapter named `name` (the module harness/devices/<name>.py's DEVICE)."""
    if name not in _LOADED:
        if name not in names():
            raise ValueError(f"device {name!r} has no adapter; known devices: {', '.join(names())}")
        _LOADED[name] = importlib.import_module(f"harness.devices.{name}").DEVICE
    return _LOADED[name]


def of(device: Device | torch.device | str) -> Device:
    """The adapter for a device given as an adapter, a torch.device or a name: a torch device maps
    to the adapter this process loaded for its type (a ROCm adapter runs torch's "cuda" tensors)."""
    if isinstance(device, Device):
        return device
    kind = torch.device(device).type
    for adapter in _LOADED.values():
        if adapter.torch_type == kind:
            return adapter
    return load(kind)
