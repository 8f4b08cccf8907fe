"""The search tree: one node per candidate, appended to disk as it lands; dispatched requests journaled."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from harness import serial
from harness.evaluate.result import EvalResult


class Action(StrEnum):
    """What a node's prompt asked for; the values are what trees on disk hold."""

    NEW = "new"  # a kernel from the task alone
    REFINE = "refine"  # a correct parent, made faster
    REPAIR = "repair"  # a failed parent, fixed
    ANALYST = "analyst"  # the analyst's advice on its parent: no attempt of its own


@dataclass
class Node:
    id: int
    parent_id: int | None
    action: Action
    prompt_id: str
    response_id: str
    source: str | None  # None when the answer held no code
    result: EvalResult | None
    cost_usd: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    wall_s: float = 0.0
    note: str = ""  # why there is no result (no code block, model declined, ...)
    extra: dict = field(default_factory=dict)

    @property
    def attempt(self) -> bool:
        """A kernel attempt: every node but an analyst's advice."""
        return self.action != Action.ANALYST

    @property
    def correct(self) -> bool:
        return self.result is not None and self.result.correct

    @property
    def speedup(self) -> float:
        """Speedup over eager of a correct node; 0 for anything else."""
        return (self.result.speedup_vs_eager or 0.0) if self.correct else 0.0

    def outcome(self) -> str:
        """One line for prompts: what happened to this candidate."""
        return self.result.summary() if self.result else self.note

    def to_dict(self) -> dict:
        return serial.to_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Node:
        return serial.from_dict(cls, data)


@dataclass(frozen=True)
class Dispatch:
    """A model call sent before its node lands: what a resumed search must ask again (its answer,
    if it arrived, is cached on disk under `prompt_id`), not choose anew."""

    id: int
    parent_id: int | None
    action: Action
    prompt_id: str
    seen: int  # how many landed nodes (in landing order) the prompt was built from
    sibling: int = 0  # calls already in flight for the same parent when this one was sent


def _read_lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _append(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())  # a crash after this line loses nothing already written


class SearchTree:
    """Nodes of one task's search, persisted as JSON lines in the order they landed (evaluated);
    reopening the file resumes the tree. Model calls sent ahead of their node's landing are
    journaled beside it (`tree.inflight.jsonl`), so a resumed search re-sends exactly those."""

    def __init__(self, path: Path, on_add=None):
        """on_add(tree, node), if given, is called after each node is persisted (the run's progress)."""
        self.path = Path(path)
        self.on_add = on_add
        self.journal_path = self.path.with_name(self.path.stem + ".inflight.jsonl")
        self.nodes: list[Node] = [Node.from_dict(data) for data in _read_lines(self.path)]
        self.dispatches: list[Dispatch] = [serial.from_dict(Dispatch, data) for data in _read_lines(self.journal_path)]

    def __len__(self) -> int:
        return len(self.nodes)

    def next_id(self) -> int:
        """One past every id landed or dispatched: ids stay unique across crashes and resumes."""
        return max([n.id for n in self.nodes] + [d.id for d in self.dispatches], default=-1) + 1

    def add(self, node: Node) -> Node:
        _append(self.path, node.to_dict())
        self.nodes.append(node)
        if self.on_add is not None:
            self.on_add(self, node)
        return node

    def dispatch(self, record: Dispatch) -> Dispatch:
        """Journal a model call before it is sent."""
        _append(self.journal_path, serial.to_dict(record))
        self.dispatches.append(record)
        return record

    def unlanded(self) -> list[Dispatch]:
        """Journaled calls whose node never landed (the search stopped while they were in flight)."""
        landed = {n.id for n in self.nodes}
        return sorted((d for d in self.dispatches if d.id not in landed), key=lambda d: d.id)

    def children(self, node_id: int | None) -> list[Node]:
        return [n for n in self.nodes if n.parent_id == node_id]

    def best(self) -> Node | None:
        correct = [n for n in self.nodes if n.correct]
        return max(correct, key=lambda n: n.speedup) if correct else None

    def totals(self) -> dict[str, float]:
        return {
            "cost_usd": sum(n.cost_usd for n in self.nodes),
            "tokens_in": sum(n.tokens_in for n in self.nodes),
            "tokens_out": sum(n.tokens_out for n in self.nodes),
            "llm_calls": len(self.nodes),
            "rounds": sum(1 for n in self.nodes if n.result is not None),
        }
