"""A template family of the offline model: one kernel template and the parameter space it walks."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

Point = tuple[Any, ...]


@dataclass(frozen=True)
class Family:
    """One kernel template, the performance choices it exposes, and the tasks it fits."""

    name: str
    template: str
    # Choices ordered by how much changing them tends to pay; the first value of each is the default.
    space: dict[str, tuple[Any, ...]]
    fixed: dict[str, str] = field(default_factory=dict)  # template values the task decides
    init: str = "none"  # constructor the template's ModelNew takes: none | hidden | groups
    parameters: tuple[str, ...] = ()  # nn.Parameter names the reference must register
    axis: str = "any"  # last: acts along the last dim only | halves: splits the last dim in two
    platform: str = "cpu"  # the platform whose candidates the template writes

    @property
    def default(self) -> Point:
        return tuple(values[0] for values in self.space.values())

    def points(self) -> list[Point]:
        """The whole space, the first choice varying fastest, so early points change what pays most."""
        return [p[::-1] for p in itertools.product(*reversed(self.space.values()))]

    def neighbours(self, point: Point) -> list[Point]:
        """Points that change one choice of `point`, the first choice first."""
        return [
            point[:i] + (value,) + point[i + 1 :]
            for i, values in enumerate(self.space.values())
            for value in values
            if value != point[i]
        ]

    def describe(self, point: Point) -> str:
        return f"offline {self.name} {json.dumps(dict(zip(self.space, point)))}"

    def values(self, point: Point) -> dict[str, Any]:
        return dict(zip(self.space, point))
