"""The offline model's search over a family's parameter space: the points a prompt shows it tried
(every candidate's approach line names its family and point, and the prompt quotes them with their
outcomes), and the point to try next."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harness.llm.offline.family import Family, Point
from harness.llm.offline.prompt import parent_section, read_parent
from harness.llm.offline.writers import FAMILIES

_APPROACH = r"approach: offline (\w+) (\{[^`\n]*\})"
# An attempt is listed as "- `<approach line>`: <outcome>" (harness.prompts.attempts_section).
_LISTED = re.compile(rf"^- `{_APPROACH}`: (.*)$", re.MULTILINE)
_PARENT_APPROACH = re.compile(rf"# {_APPROACH}")
_SPEEDUP = re.compile(r"^correct \(.*?([0-9.]+(?:e[+-]?\d+)?)x vs eager")


@dataclass(frozen=True)
class Attempt:
    family: str
    point: Point
    speedup: float | None  # None unless the attempt was correct


def _attempt(family_name: str, params: str, outcome: str) -> Attempt | None:
    family = FAMILIES.get(family_name)
    try:
        values = json.loads(params)
    except json.JSONDecodeError:
        return None
    if family is None or not isinstance(values, dict) or list(values) != list(family.space):
        return None
    point = tuple(values.values())
    if any(v not in choices for v, choices in zip(point, family.space.values())):
        return None
    speedup = _SPEEDUP.match(outcome.strip())
    return Attempt(family_name, point, float(speedup.group(1)) if speedup else None)


def _parent_attempt(prompt: str) -> Attempt | None:
    """The version being refined, when this model wrote it."""
    parent = parent_section(prompt)
    shown = read_parent(parent) if parent is not None else None
    approach = _PARENT_APPROACH.fullmatch(shown[1]) if shown else None
    return _attempt(approach.group(1), approach.group(2), shown[0]) if approach else None


def parse_attempts(prompt: str) -> tuple[list[Attempt], Attempt | None]:
    """This model's earlier attempts quoted in a prompt, and the parent being refined (if one of them)."""
    listed = [_attempt(*m.groups()) for m in _LISTED.finditer(prompt)]
    parent = _parent_attempt(prompt)
    attempts = [a for a in [*listed, parent] if a is not None]
    return attempts, parent


def next_point(
    family: Family, attempts: list[Attempt], parent: Attempt | None, refining: bool, skip: int = 0
) -> tuple[Point | None, str]:
    """The point to try next and why: the default first; when refining, an untried neighbour of the
    fastest point seen (else of the parent); otherwise, and once those run out, the space in order.
    `skip` passes over that many of those choices: they are being written by requests in flight."""
    mine = [a for a in attempts if a.family == family.name]
    tried = {a.point for a in mine}
    timed = [a for a in mine if a.speedup is not None]
    best = max(timed, key=lambda a: a.speedup) if timed else None
    anchor = best or (parent if parent and parent.family == family.name else None)
    choices: dict[Point, str] = {}
    if not tried:
        choices[family.default] = "the default point of my template"
    if refining and anchor:
        basis = f"the fastest point so far ({best.speedup:g}x vs eager)" if best else "the version to improve"
        for point in family.neighbours(anchor.point):
            choices.setdefault(point, f"an untried neighbour of {basis}")
    for point in family.points():
        choices.setdefault(point, "the next untried point of my template")
    untried = [(point, why) for point, why in choices.items() if point not in tried]
    if untried:
        point, why = untried[min(skip, len(untried) - 1)]
        return point, why + (f" (request {skip + 1} of those in flight)" if skip else "")
    return None, f"{best.speedup:g}x vs eager" if best else "none was correct"
