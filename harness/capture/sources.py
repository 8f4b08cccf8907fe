"""Where a captured model comes from: a built-in entry of conf/capture/ (the group is the registry)
or any `module:factory` whose factory returns `(model, example_inputs)`."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from harness.errors import ForgeBenchError


@dataclass
class Workload:
    """A model and the inputs of one forward, on the capture device."""

    name: str
    model: torch.nn.Module
    inputs: tuple | list | dict
    settings: dict  # what built it (a conf/capture/ entry), recorded in the manifest

    def run(self) -> Any:
        if isinstance(self.inputs, dict):
            return self.model(**self.inputs)
        return self.model(*self.inputs)


def _move(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    if isinstance(value, torch.Tensor):
        cast = dtype if dtype is not None and value.is_floating_point() else value.dtype
        return value.to(device=device, dtype=cast)
    if isinstance(value, dict):
        return {k: _move(v, device, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_move(v, device, dtype) for v in value)
    return value


def _import_factory(spec: str) -> Callable[[], Any]:
    module_name, _, attr = spec.partition(":")
    # The `forgebench` script does not put the working directory on sys.path as `python -m` does.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ForgeBenchError(
            f"capture --model {spec}: module '{module_name}' cannot be imported ({exc}); "
            "give an importable module:factory, run from the folder that holds it."
        ) from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ForgeBenchError(
            f"capture --model {spec}: module '{module_name}' has no function '{attr}'; "
            "name a factory that returns (model, example_inputs)."
        )
    return factory


def _checked(spec: str, built: Any) -> tuple[torch.nn.Module, tuple | list | dict]:
    if (
        not isinstance(built, (tuple, list))
        or len(built) != 2
        or not isinstance(built[0], torch.nn.Module)
        or not isinstance(built[1], (tuple, list, dict))
    ):
        raise ForgeBenchError(
            f"capture --model {spec}: the factory returned {type(built).__name__}; it must return "
            "(model, example_inputs) with inputs a tuple or list of tensors or a dict of keyword arguments."
        )
    return built[0], built[1]


def from_factory(spec: str, name: str | None, device: torch.device, dtype: torch.dtype | None) -> Workload:
    """Call a user's `module:factory` and move what it built to the device (and dtype, if given)."""
    factory = _import_factory(spec)
    try:
        built = factory()
    except Exception as exc:
        raise ForgeBenchError(f"capture --model {spec}: the factory raised {type(exc).__name__}: {exc}") from exc
    model, inputs = _checked(spec, built)
    model = model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)
    label = name or spec.partition(":")[0].rsplit(".", 1)[-1]
    return Workload(label, model.eval(), _move(inputs, device, dtype), {"factory": spec})


def builtin_names() -> list[str]:
    from harness.config import group_options

    return group_options("capture")


def from_builtin(name: str, device: torch.device, dtype_name: str | None, overrides: list[str]) -> Workload:
    """Build a conf/capture/<name>.yaml entry: its `workload` is instantiated with device and dtype."""
    from omegaconf import OmegaConf

    from harness.config import compose

    if name not in builtin_names():
        raise ForgeBenchError(
            f"capture --model {name}: no such built-in model; choose one of {', '.join(builtin_names())} "
            "(conf/capture/) or give module:factory."
        )
    cfg = compose(overrides=[f"+capture={name}", *overrides]).capture
    # A meta capture stands in for the GPU run the machine cannot do: it takes the GPU's dtype.
    dtype_name = dtype_name or cfg.dtype["cuda" if device.type == "meta" else device.type]
    dtype = dtype_of(dtype_name)
    model, inputs = _build(name, cfg.workload, device, dtype)
    settings = {**OmegaConf.to_container(cfg, resolve=True), "dtype": dtype_name}
    return Workload(name, model.eval(), _move(inputs, device, None), settings)


def _build(name: str, node: Any, device: torch.device, dtype: torch.dtype) -> tuple[torch.nn.Module, Any]:
    """Call the entry's builder; its own one-sentence errors (a missing package) pass through as they are."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        return instantiate(node, _convert_="all", device=device, dtype=dtype)
    except InstantiationException as exc:
        if isinstance(exc.__cause__, ForgeBenchError):
            raise exc.__cause__ from None
        cause = exc.__cause__ or exc
        raise ForgeBenchError(
            f"conf/capture/{name}.yaml: its workload cannot be built ({type(cause).__name__}: {cause}); fix the entry."
        ) from exc


def dtype_of(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ForgeBenchError(f"dtype '{name}' is not a torch dtype; write e.g. float32, bfloat16 or float16.")
    return dtype
