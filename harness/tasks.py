"""Tasks: discovery by walking tasks/, loading task.yaml + reference.py, validation."""

from __future__ import annotations

import fnmatch
import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ForgeBenchError

TASKS_ROOT = Path(__file__).resolve().parents[1] / "tasks"

# Fields a task.yaml may hold, with the type each must have.
TASK_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str,
    "source": str,
    "operator": str,
    "description": str,
    "shapes": list,
    "dtypes": list,
    "tolerance": dict,
    "time_share": (int, float),
    "call_count": int,
    "bytes_moved": (int, float),
    "flops": (int, float),
    "fused": bool,
    "members": list,
    "tags": list,
}
REQUIRED_FIELDS = ("id", "operator")
_TYPE_NAMES = {str: "string", list: "list", dict: "mapping", int: "whole number", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class Task:
    """One operator at real shapes: a KernelBench-format reference plus what the file cannot say."""

    id: str
    reference_path: Path
    source: str = "kernelbench"
    operator: str = ""
    description: str = ""
    shapes: list = field(default_factory=list)
    dtypes: list = field(default_factory=list)
    tolerance: dict = field(default_factory=dict)
    time_share: float | None = None
    call_count: int | None = None
    bytes_moved: float | None = None
    flops: float | None = None
    fused: bool = False
    members: list = field(default_factory=list)  # a fused task's ATen calls, in order
    tags: list = field(default_factory=list)

    @property
    def reference_source(self) -> str:
        return self.reference_path.read_text()

    def to_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}


def load_reference_module(path: Path, name: str = "forgebench_reference") -> types.ModuleType:
    """Import a KernelBench-format file and check it has Model, get_inputs, get_init_inputs."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ForgeBenchError(f"{path}: cannot be imported as Python; check the file name ends in .py.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ForgeBenchError(f"{path}: importing it failed ({type(exc).__name__}: {exc}); fix the reference.") from exc
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ForgeBenchError(
            f"{path}: defines no {', '.join(missing)}; a reference needs class Model(nn.Module), "
            "get_inputs() and get_init_inputs() (the KernelBench contract)."
        )
    return module


def _check_fields(data: Any, yaml_path: Path) -> dict:
    if not isinstance(data, dict):
        raise ForgeBenchError(
            f"{yaml_path}: must be a mapping of fields (id, operator, ...), not {type(data).__name__}."
        )
    unknown = sorted(set(data) - set(TASK_FIELDS))
    if unknown:
        raise ForgeBenchError(f"{yaml_path}: unknown field '{unknown[0]}'; the fields are {', '.join(TASK_FIELDS)}.")
    for name in REQUIRED_FIELDS:
        if name not in data:
            raise ForgeBenchError(f"{yaml_path}: field '{name}' is missing; add it (see tasks/README.md).")
    for name, value in data.items():
        expected = TASK_FIELDS[name] if isinstance(TASK_FIELDS[name], tuple) else (TASK_FIELDS[name],)
        # bool is an int to isinstance; a task field is never both.
        if value is not None and (
            not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected)
        ):
            want = " or ".join(_TYPE_NAMES[t] for t in expected)
            raise ForgeBenchError(f"{yaml_path}: field '{name}' is {value!r}; write a {want} there.")
    if data["id"] != yaml_path.parent.name:
        raise ForgeBenchError(
            f"{yaml_path}: field 'id' is {data['id']!r} but the folder is {yaml_path.parent.name!r}; make them equal."
        )
    return data


def load_task_dir(folder: Path) -> Task:
    """Load tasks/<source>/<task_id>/ (task.yaml + reference.py)."""
    yaml_path = folder / "task.yaml"
    reference = folder / "reference.py"
    if not reference.is_file():
        raise ForgeBenchError(f"{folder}: has task.yaml but no reference.py; add the KernelBench-format reference.")
    try:
        data = yaml.safe_load(yaml_path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ForgeBenchError(f"{yaml_path}: is not valid YAML{where}; fix the syntax.") from exc
    data = _check_fields(data, yaml_path)
    data.setdefault("source", folder.parent.name)
    return Task(reference_path=reference, **data)


def load_kernelbench_file(path: Path) -> Task:
    """A bare KernelBench file is a task as it is: id from its file name, defaults for the rest."""
    if not path.is_file() or path.suffix != ".py":
        raise ForgeBenchError(f"{path}: is not a Python file; pass a KernelBench-format .py file or a task id.")
    return Task(id=path.stem, reference_path=path.resolve(), source="kernelbench", operator="")


def discover(root: Path = TASKS_ROOT) -> list[Task]:
    """Every task folder under root, sorted by id; a broken one raises with its file and field."""
    tasks = [load_task_dir(p.parent) for p in sorted(root.rglob("task.yaml"))]
    seen: dict[str, Path] = {}
    for task in tasks:
        if task.id in seen:
            raise ForgeBenchError(
                f"task id '{task.id}' is used by both {seen[task.id]} and {task.reference_path.parent}; "
                "rename one folder."
            )
        seen[task.id] = task.reference_path.parent
    return sorted(tasks, key=lambda t: t.id)


def select(spec: str | list[str], root: Path = TASKS_ROOT) -> list[Task]:
    """Tasks named by a path to a KernelBench file or folder, or by id/source glob patterns."""
    patterns = [spec] if isinstance(spec, str) else list(spec)
    chosen: dict[str, Task] = {}
    everything: list[Task] | None = None
    for pattern in patterns:
        path = Path(pattern).expanduser()
        if pattern.endswith(".py") or path.is_dir():
            files = sorted(path.glob("*.py")) if path.is_dir() else [path]
            if not files:
                raise ForgeBenchError(f"{path}: holds no .py files; point --tasks at KernelBench-format files.")
            chosen.update({t.id: t for t in map(load_kernelbench_file, files)})
            continue
        everything = discover(root) if everything is None else everything
        hits = [
            t
            for t in everything
            if fnmatch.fnmatch(t.id, pattern) or fnmatch.fnmatch(f"{t.source}/{t.id}", pattern) or t.source == pattern
        ]
        if not hits:
            raise ForgeBenchError(
                f"no task matches '{pattern}'; run `forgebench tasks list` to see the ids, "
                "or pass a path to a .py file."
            )
        chosen.update({t.id: t for t in hits})
    return list(chosen.values())


def resolve_one(spec: str, root: Path = TASKS_ROOT) -> Task:
    """A single task, by id or by path (task folder or KernelBench file)."""
    path = Path(spec)
    if (path / "task.yaml").is_file():
        return load_task_dir(path)
    tasks = select(spec, root)
    if len(tasks) != 1:
        raise ForgeBenchError(f"'{spec}' names {len(tasks)} tasks; give one task id or one file.")
    return tasks[0]
