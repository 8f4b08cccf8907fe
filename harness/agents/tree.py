"""The search tree: one node per candidate, appended to disk before the next node starts."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.evaluate.result import EvalResult

ACTIONS = ("new", "refine", "repair", "analyst")


@dataclass
class Node:
    id: int
    parent_id: int | None
    action: str
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
        data = asdict(self)
        data["result"] = self.result.to_dict() if self.result else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Node:
        result = EvalResult.from_dict(data["result"]) if data.get("result") else None
        return cls(**{**data, "result": result})


class SearchTree:
    """Nodes of one task's search, persisted as JSON lines; reopening the file resumes the tree."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.nodes: list[Node] = []
        if self.path.is_file():
            for line in self.path.read_text().splitlines():
                if line.strip():
                    self.nodes.append(Node.from_dict(json.loads(line)))

    def __len__(self) -> int:
        return len(self.nodes)

    def next_id(self) -> int:
        return len(self.nodes)

    def add(self, node: Node) -> Node:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(node.to_dict()) + "\n")
            f.flush()
            os.fsync(f.fileno())  # a crash after this line loses nothing already evaluated
        self.nodes.append(node)
        return node

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
