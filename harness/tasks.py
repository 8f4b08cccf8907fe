"""Tasks: discovery by walking tasks/, loading task.yaml + reference.py, validation."""

from __future__ import annotations

import ast
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness import serial
from harness.errors import ForgeBenchError
from harness.reference import CONTRACT, load_reference_module  # noqa: F401  (tasks' readers use it)

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
FORMAT_DOC = "tasks/README.md"
# libyaml's parser where PyYAML was built with it: every suite start, CLI command and test module that
# names a task surveys all ~360 task files, 0.8 s in the pure-Python parser against 0.1 s in libyaml.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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

    @property
    def content_hash(self) -> str:
        """12 hex of reference.py and task.yaml: a recaptured task never mixes with the old one."""
        import hashlib

        digest = hashlib.sha256(self.reference_path.read_bytes())
        yaml_path = self.reference_path.with_name("task.yaml")
        if yaml_path.is_file() and self.reference_path.name == "reference.py":
            digest.update(yaml_path.read_bytes())
        return digest.hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return serial.to_dict(self)


def task_set_id(name: str, tasks: list[Task]) -> str:
    """`<name>@<12 hex>`: the suite's name and a hash of its tasks' ids and contents. Runs are
    ranked against each other only within one task set."""
    import hashlib

    listing = "\n".join(sorted(f"{t.id}:{t.content_hash}" for t in tasks))
    return f"{name}@{hashlib.sha256(listing.encode()).hexdigest()[:12]}"


def set_name(spec: str | list[str]) -> str:
    """The name a task set given as patterns and paths goes by in the records (task_set_id's): the
    patterns joined by commas, each path (a task folder, a tree of them, a KernelBench file or folder)
    by its own name, so a table reads `relu_64x256@...` and not the path it was given from some
    folder. Two sets of one name but other tasks still differ by task_set_id's hash."""
    patterns = [spec] if isinstance(spec, str) else [str(p) for p in spec]
    return ",".join(_as_path(p).resolve().name if _names_a_path(p) else p for p in patterns)


def _as_path(pattern: str) -> Path:
    return Path(pattern).expanduser()


def _names_a_path(pattern: str) -> bool:
    """Whether a --tasks pattern is a path (a .py file or a folder) rather than an id or source glob."""
    return pattern.endswith(".py") or _as_path(pattern).is_dir()


@dataclass(frozen=True)
class BrokenTask:
    """A task folder or file that does not load. It breaks only itself: selected like a task (by its
    folder's name and source), it shows in the suite as one error with the reason."""

    id: str
    source: str
    path: Path
    reason: str


def _defined_names(tree: ast.Module) -> set[str] | None:
    """Top-level names a module defines; None when `import *` makes that unknowable without running it."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def check_reference(path: Path) -> None:
    """A reference must parse and define the KernelBench contract; checked without running it."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        line = f" at line {exc.lineno}" if getattr(exc, "lineno", None) else ""
        raise ForgeBenchError(f"{path}: is not valid Python{line}; fix the reference (see {FORMAT_DOC}).") from exc
    except OSError as exc:
        raise ForgeBenchError(f"{path}: cannot be read ({exc.strerror}); check the file.") from exc
    names = _defined_names(tree)
    missing = [n for n in CONTRACT if names is not None and n not in names]
    if missing:
        raise ForgeBenchError(
            f"{path}: defines no {', '.join(missing)}; a reference needs class Model(nn.Module), "
            f"get_inputs() and get_init_inputs() (the KernelBench contract, {FORMAT_DOC})."
        )


def _check_fields(data: Any, yaml_path: Path) -> dict:
    if not isinstance(data, dict):
        raise ForgeBenchError(
            f"{yaml_path}: must be a mapping of fields (id, operator, ...), not {type(data).__name__}."
        )
    unknown = sorted(set(data) - set(TASK_FIELDS))
    if unknown:
        raise ForgeBenchError(
            f"{yaml_path}: unknown field '{unknown[0]}'; the fields are {', '.join(TASK_FIELDS)} ({FORMAT_DOC})."
        )
    for name in REQUIRED_FIELDS:
        if name not in data:
            raise ForgeBenchError(f"{yaml_path}: field '{name}' is missing; add it (see {FORMAT_DOC}).")
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
        raise ForgeBenchError(
            f"{folder}: has task.yaml but no reference.py; add the KernelBench-format reference ({FORMAT_DOC})."
        )
    try:
        data = yaml.load(yaml_path.read_text(), Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ForgeBenchError(f"{yaml_path}: is not valid YAML{where}; fix the syntax.") from exc
    data = _check_fields(data, yaml_path)
    check_reference(reference)
    data.setdefault("source", folder.parent.name)
    return Task(reference_path=reference.resolve(), **data)


def load_kernelbench_file(path: Path) -> Task:
    """A bare KernelBench file is a task as it is: id from its file name, defaults for the rest."""
    if not path.is_file() or path.suffix != ".py":
        raise ForgeBenchError(f"{path}: is not a Python file; pass a KernelBench-format .py file or a task id.")
    check_reference(path)
    return Task(id=path.stem, reference_path=path.resolve(), source="kernelbench", operator="")


def _broken(folder: Path, exc: ForgeBenchError) -> BrokenTask:
    return BrokenTask(folder.name, folder.parent.name, folder, str(exc))


def survey(root: Path = TASKS_ROOT) -> tuple[list[Task], list[BrokenTask]]:
    """Every task folder under root: those that load, sorted by id, and those that do not, each with
    its sentence. Two folders with one id are both broken: neither can be told apart by name."""
    tasks: list[Task] = []
    broken: list[BrokenTask] = []
    for folder in sorted(p.parent for p in Path(root).rglob("task.yaml")):
        try:
            tasks.append(load_task_dir(folder))
        except ForgeBenchError as exc:
            broken.append(_broken(folder, exc))
    by_id: dict[str, list[Task]] = {}
    for task in tasks:
        by_id.setdefault(task.id, []).append(task)
    for task_id, same in by_id.items():
        if len(same) > 1:
            folders = [t.reference_path.parent for t in same]
            reason = f"task id '{task_id}' is used by both {folders[0]} and {folders[1]}; rename one folder."
            broken += [BrokenTask(task_id, t.source, t.reference_path.parent, reason) for t in same]
            tasks = [t for t in tasks if t.id != task_id]
    return sorted(tasks, key=lambda t: t.id), broken


def discover(root: Path = TASKS_ROOT) -> list[Task]:
    """Every task under root that loads, sorted by id (survey() also names those that do not)."""
    return survey(root)[0]


def _from_path(path: Path) -> list[Task | BrokenTask]:
    """What a path names: a task folder (with its task.yaml), a tree of them, or KernelBench files."""
    if (path / "task.yaml").is_file():
        try:
            return [load_task_dir(path)]
        except ForgeBenchError as exc:
            return [_broken(path, exc)]
    if path.is_dir() and any(path.rglob("task.yaml")):
        tasks, broken = survey(path)
        return [*tasks, *broken]
    files = sorted(path.glob("*.py")) if path.is_dir() else [path]
    if not files:
        raise ForgeBenchError(
            f"{path}: holds no task.yaml and no .py files; point --tasks at task folders or KernelBench-format files."
        )
    found: list[Task | BrokenTask] = []
    for file in files:
        try:
            found.append(load_kernelbench_file(file))
        except ForgeBenchError as exc:
            found.append(BrokenTask(file.stem, "kernelbench", file, str(exc)))
    return found


def select(spec: str | list[str], root: Path = TASKS_ROOT, keep_broken: bool = False) -> list:
    """Tasks named by paths (task folders, KernelBench files or folders) or by id/source glob patterns.
    A broken task a pattern names is returned as a BrokenTask when keep_broken, else raised; broken
    tasks the patterns do not name are left out."""
    patterns = [spec] if isinstance(spec, str) else list(spec)
    chosen: dict[str, Task | BrokenTask] = {}
    everything: list[Task | BrokenTask] | None = None
    for pattern in patterns:
        if _names_a_path(pattern):
            chosen.update({t.id: t for t in _from_path(_as_path(pattern))})
            continue
        if everything is None:
            tasks, broken = survey(root)
            everything = [*tasks, *broken]
        hits = [
            t
            for t in everything
            if fnmatch.fnmatch(t.id, pattern) or fnmatch.fnmatch(f"{t.source}/{t.id}", pattern) or t.source == pattern
        ]
        if not hits:
            raise ForgeBenchError(
                f"no task matches '{pattern}'; run `forgebench tasks list` to see the ids, "
                "or pass a task folder or a .py file."
            )
        chosen.update({t.id: t for t in hits})
    if not keep_broken:
        for task in chosen.values():
            if isinstance(task, BrokenTask):
                raise ForgeBenchError(task.reason)
    return list(chosen.values())


def resolve_one(spec: str, root: Path = TASKS_ROOT) -> Task:
    """A single task, by id or by path (task folder or KernelBench file)."""
    tasks = select(spec, root)
    if len(tasks) != 1:
        raise ForgeBenchError(f"'{spec}' names {len(tasks)} tasks; give one task id or one file.")
    return tasks[0]
