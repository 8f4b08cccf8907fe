"""Records as plain data: one conversion for every dataclass the harness writes (results, nodes,
timings, completions, tasks, the worker's report), and its typed inverse.

`to_dict` is dataclasses' own conversion, so a field added to a record is serialised everywhere;
`from_dict` checks each value against the field's annotation, because some records are read back
from files an untrusted process could have written (a worker's report).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class RecordError(ValueError):
    """A value does not have the type its record's field declares."""


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def to_dict(record: Any) -> dict[str, Any]:
    """The record's fields (nested records included) as JSON-ready data, with the properties its
    class lists in `DERIVED` (EvalResult's `correct`) beside them, at every level."""

    def convert(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            data = {f.name: convert(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
            return {**{name: getattr(obj, name) for name in getattr(obj, "DERIVED", ())}, **data}
        if isinstance(obj, (list, tuple)):
            return [convert(v) for v in obj]
        if isinstance(obj, dict):
            return {k: convert(v) for k, v in obj.items()}
        return _plain(obj)

    return convert(record)


def _typed(value: Any, hint: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return _typed(value, arg, where)
            except RecordError:
                continue
        raise RecordError(f"{where} is {value!r}, not {hint}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        raise RecordError(f"{where} is {value!r}, not a finite number")
    if hint in (int, str, bool):
        if isinstance(value, hint) and (hint is bool or not isinstance(value, bool)):
            return value
        raise RecordError(f"{where} is {value!r}, not {hint.__name__}")
    if hint is Path:
        return Path(_typed(value, str, where))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError as exc:
            raise RecordError(f"{where} is {value!r}, not one of {[m.value for m in hint]}") from exc
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, value, where)
    container = origin or hint
    if container is dict:
        if not isinstance(value, dict):
            raise RecordError(f"{where} is {type(value).__name__}, not a mapping")
        if not args:
            return dict(value)
        return {_typed(k, args[0], where): _typed(v, args[1], f"{where}[{k!r}]") for k, v in value.items()}
    if container in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise RecordError(f"{where} is {type(value).__name__}, not a list")
        item = args[0] if args else Any
        items = [_typed(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if container is list else tuple(items)
    raise RecordError(f"{where}: no reader for the type {hint}")


def from_dict(cls: type[T], data: Any, where: str | None = None) -> T:
    """A `cls` from data shaped like to_dict's, each value checked against its field's type;
    unknown keys (a newer writer's, or derived ones) are ignored, missing ones take defaults."""
    where = where or cls.__name__
    if not isinstance(data, dict):
        raise RecordError(f"{where} is {type(data).__name__}, not a mapping")
    hints = typing.get_type_hints(cls)
    values = {
        f.name: _typed(data[f.name], hints[f.name], f"{where}.{f.name}")
        for f in dataclasses.fields(cls)
        if f.init and f.name in data
    }
    try:
        return cls(**values)
    except TypeError as exc:  # a required field missing
        raise RecordError(f"{where}: {exc}") from exc
