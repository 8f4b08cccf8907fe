"""The configuration's schema: typed records in Hydra's ConfigStore, so a bad value fails at compose time.

The top-level record and the evaluate and budget groups are registered here; their dataclasses
(ForgeBenchConfig below, EvalSettings, Budget) hold the defaults, and the YAML under conf/ holds
only what differs from them. An entry that names a class with `_target_` (agent, model, platform)
is typed by that class's own fields: adding a strategy is one file and one YAML, no schema to keep
in step.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from harness.budget import Budget
from harness.errors import ForgeBenchError
from harness.evaluate import EvalSettings
from harness.record import DEFAULT_EXPERIMENT, DEFAULT_TRACKING_URI

SCHEMA_NAME = "forgebench_schema"
TARGET_GROUPS = ("agent", "model", "platform")


@dataclass
class SuiteConfig:
    name: str = MISSING
    tasks: list[str] = MISSING
    # The suite's evaluate.torch_ops when the run sets none: KernelBench's problems allow PyTorch
    # ops beside the candidate's own kernels, as KernelBench grades them; a captured task is the op.
    torch_ops: Optional[str] = None  # noqa: UP045 (OmegaConf reads Optional at runtime)


@dataclass
class ForgeBenchConfig:
    agent: Any = MISSING
    model: Any = MISSING
    platform: Any = MISSING
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    budget: Budget = field(default_factory=Budget)
    evaluate: EvalSettings = field(default_factory=EvalSettings)
    # A task id glob, a source name, a task folder or KernelBench-format files (one or a list);
    # null takes the suite's list.
    tasks: Any = None
    # A model's capture settings (conf/capture/), composed only by `forgebench capture` (+capture=NAME).
    capture: Any = None
    experiment: str = DEFAULT_EXPERIMENT
    # MLFLOW_TRACKING_URI, when set, wins (a team server); else an embedded store in the working directory.
    tracking_uri: str = f"${{oc.env:MLFLOW_TRACKING_URI,{DEFAULT_TRACKING_URI}}}"
    # Trees, transcripts and candidates of each suite run go under here.
    run_root: str = "runs"
    # A fixed folder for this run instead of a new one under run_root: running the same command
    # again resumes every task's persisted search tree from it.
    run_dir: Optional[str] = None  # noqa: UP045 (OmegaConf reads Optional, not X | None, at runtime)
    # Content-addressed builds shared by every run on this machine.
    cache_dir: str = "${oc.env:FORGEBENCH_CACHE,.forgebench/cache}"


def register(targets: dict[str, str] | None = None) -> dict[str, type]:
    """Put the schema in Hydra's ConfigStore (conf/config.yaml names it first in its defaults).
    With `targets` ({group: the _target_ its chosen entry names}), each of those groups is typed by
    its class's fields: the entry's YAML is checked against them, and an override may set any of
    them, listed in the YAML or not. Returns each typed group's record."""
    from hydra.core.config_store import ConfigStore

    typed = _schemas(targets or {})
    node: type = ForgeBenchConfig
    if typed:
        columns = [(group, schema, field(default_factory=schema)) for group, schema in typed.items()]
        node = dataclasses.make_dataclass("ForgeBenchConfig", columns, bases=(ForgeBenchConfig,))
    ConfigStore.instance().store(name=SCHEMA_NAME, node=node)
    return {"evaluate": EvalSettings, "budget": Budget, **typed}


def _schemas(targets: dict[str, str]) -> dict[str, type]:
    return {group: target_schema(target, group) for group, target in targets.items()}


# What OmegaConf can check; a field of any other type is left untyped (Any).
_CHECKABLE = (int, float, str, bool, list, dict)


def _checkable(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if hint in _CHECKABLE or origin in (list, dict):
        return hint
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        inner = _checkable(args[0])
        return Optional[inner] if inner is not Any else Any  # noqa: UP045
    return Any


def _init_fields(cls: type) -> list[tuple[str, Any, Any]]:
    """(name, type, dataclass field) of what the class's constructor takes, with its defaults and
    the types OmegaConf can check."""
    try:
        hints = typing.get_type_hints(cls if dataclasses.is_dataclass(cls) else cls.__init__)
    except Exception:  # a hint naming a type only imported for type checking: leave it untyped
        hints = {}
    columns = []
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.init or f.name.startswith("_"):
                continue
            if f.default_factory is not dataclasses.MISSING:
                default = field(default_factory=f.default_factory)
            else:
                default = field(default=MISSING if f.default is dataclasses.MISSING else f.default)
            columns.append((f.name, _checkable(hints.get(f.name, Any)), default))
        return columns
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        value = MISSING if p.default is inspect.Parameter.empty else p.default
        default = (
            field(default_factory=lambda v=value: type(v)(v))
            if isinstance(value, (list, dict))
            else field(default=value)
        )
        columns.append((p.name, _checkable(hints.get(p.name, Any)), default))
    return columns


def target_schema(target: str, group: str) -> type:
    """A structured-config dataclass with `_target_` and the constructor's fields of the class named."""
    module_name, _, class_name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ForgeBenchError(
            f"{group}._target_ '{target}' names no class that can be imported; fix the entry in conf/{group}/."
        ) from exc
    columns = [("_target_", str, field(default=target)), *_init_fields(cls)]
    return dataclasses.make_dataclass(f"{class_name}Config", columns)
