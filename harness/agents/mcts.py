"""Strategy `mcts`: Monte Carlo Tree Search over kernel attempts, as in Kernel Forge.

Values come from measured speedups normalised by the best seen so far, so rewards stay in
[0, 1] whatever the task; visit counts and values are derived from the persisted tree, so a
resumed search continues exactly where it stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.agents.base import AgentContext, AgentOutcome, expand
from harness.agents.tree import Node, SearchTree


@dataclass
class MCTS:
    exploration: float = 1.0
    widening_k: float = 1.0  # a node may have ceil(k * visits^alpha) children (progressive widening)
    widening_alpha: float = 0.5
    max_repairs: int = 2  # consecutive repairs along a lineage before the model must try elsewhere
    name: str = "mcts"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        while (reason := ctx.budget.exhausted(ctx.tree)) is None:
            parent = self.select(ctx.tree)
            action = "new" if parent is None else ("refine" if parent.correct else "repair")
            expand(ctx, action, parent)
        return AgentOutcome(ctx.tree.best(), reason, ctx.tree)

    def _stats(self, tree: SearchTree) -> tuple[dict[int | None, int], dict[int | None, float]]:
        """Visits and summed reward of every subtree (None is the root, the task itself)."""
        best = max((n.speedup for n in tree.nodes), default=0.0) or 1.0
        visits: dict[int | None, int] = {None: 0}
        value: dict[int | None, float] = {None: 0.0}
        by_id = {n.id: n for n in tree.nodes}
        for node in tree.nodes:
            reward = node.speedup / best
            cursor: int | None = node.id
            while True:
                visits[cursor] = visits.get(cursor, 0) + 1
                value[cursor] = value.get(cursor, 0.0) + reward
                if cursor is None:
                    break
                cursor = by_id[cursor].parent_id
        return visits, value

    def _expandable(self, node: Node, tree: SearchTree) -> bool:
        if node.source is None:
            return False  # nothing to refine or repair
        depth, cursor = 0, node
        while cursor is not None and not cursor.correct:
            depth += 1
            cursor = next((n for n in tree.nodes if n.id == cursor.parent_id), None)
        return depth <= self.max_repairs

    def select(self, tree: SearchTree) -> Node | None:
        """Descend by UCT; stop at the first node whose widening allows one more child."""
        visits, value = self._stats(tree)
        current: Node | None = None
        while True:
            key = current.id if current else None
            usable = [c for c in tree.children(key) if self._expandable(c, tree) or tree.children(c.id)]
            here = current is None or self._expandable(current, tree)
            widen = len(tree.children(key)) < math.ceil(self.widening_k * max(visits[key], 1) ** self.widening_alpha)
            if (widen and here) or not usable:
                return current if here else None
            log_n = math.log(max(visits[key], 1))
            current = max(
                usable, key=lambda c: value[c.id] / visits[c.id] + self.exploration * math.sqrt(log_n / visits[c.id])
            )
