"""Strategy `refine`: one new kernel, then keep improving the best so far, repairing failures on the way.

The next step is read from the tree alone, so a resumed run continues where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.agents.base import AgentContext, AgentOutcome, expand
from harness.agents.tree import Action, Node, SearchTree


def failed_lineage(tree: SearchTree, node: Node) -> int:
    """How many failed candidates end at `node`, counting up its parents: 1 for a failed `new`."""
    by_id = {n.id: n for n in tree.nodes}
    depth, cursor = 0, node
    while cursor is not None and not cursor.correct:
        depth += 1
        cursor = by_id.get(cursor.parent_id)
    return depth


def next_step(tree: SearchTree, max_repairs: int) -> tuple[Action, Node | None]:
    """Repair the last candidate while it failed and its lineage has repairs left; else refine the
    best correct candidate; else, with none correct yet, start anew."""
    candidates = [n for n in tree.nodes if n.attempt]
    last = candidates[-1] if candidates else None
    repairable = last is not None and not last.correct and last.source is not None
    if repairable and failed_lineage(tree, last) <= max_repairs:
        return Action.REPAIR, last
    best = tree.best()
    return (Action.REFINE, best) if best else (Action.NEW, None)


@dataclass
class Refine:
    max_repairs: int = 2  # repairs in a row along one lineage before refining the best or starting anew
    name: str = "refine"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        while (reason := ctx.budget.exhausted(ctx.tree)) is None:
            expand(ctx, *next_step(ctx.tree, self.max_repairs))
        return AgentOutcome(ctx.tree.best(), reason, ctx.tree)
