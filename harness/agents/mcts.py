"""Strategy `mcts`: Monte Carlo Tree Search over kernel attempts, as in Kernel Forge.

Values come from measured speedups normalised by the best seen so far, so rewards stay in
[0, 1] whatever the task; visit counts and values are derived from the persisted tree, so a
resumed search continues exactly where it stopped. Several expansions can be in flight: the model
writes the next candidates while the landed ones are evaluated, and a call in flight counts as a
visit with reward 0 (virtual loss) so selection spreads rather than picking one leaf N times.
Prompts carry lineage context (best, ancestors, recent nodes) within a token budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.agents.base import AgentContext, AgentOutcome, attempts_among
from harness.agents.inflight import InFlight
from harness.agents.lineage import fit, lineage
from harness.agents.tree import Action, Node, SearchTree
from harness.prompts import build_messages, sibling_section


@dataclass
class MCTS:
    exploration: float = 1.0
    widening_k: float = 1.0  # a node may have ceil(k * visits^alpha) children (progressive widening)
    widening_alpha: float = 0.5
    max_repairs: int = 2  # consecutive repairs along a lineage before the model must try elsewhere
    in_flight: int = 1  # expansions sent and not yet landed; 1 is one after another
    context_tokens: int = 12000  # estimated tokens a prompt may hold; lineage context is cut to fit
    context_recent: int = 3  # recent nodes offered with their code in the lineage context
    name: str = "mcts"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        with InFlight(ctx, self.in_flight) as flight:
            while True:
                while flight.has_room() and ctx.budget.exhausted(ctx.tree, len(flight)) is None:
                    if not flight.resend():
                        parent = self.select(ctx.tree, flight.parents())
                        action = Action.NEW if parent is None else (Action.REFINE if parent.correct else Action.REPAIR)
                        sibling = flight.siblings(parent)
                        messages = self.messages(ctx, ctx.tree.nodes, parent, action, sibling)
                        flight.send(parent, action, messages, sibling)
                if not len(flight):
                    break
                flight.land_next()
        return AgentOutcome(ctx.tree.best(), ctx.budget.exhausted(ctx.tree), ctx.tree)

    def messages(
        self, ctx: AgentContext, view: list[Node], parent: Node | None, action: Action, sibling: int = 0
    ) -> list[dict[str, str]]:
        """The prompt for expanding `parent` from the landed nodes `view` with `sibling` calls for
        the same parent in flight: a pure function of them, so the tree alone gives back the exact
        chat the model saw (tests/agents/test_mcts_inflight.py rebuilds every one)."""
        note = sibling_section(sibling)
        build = lambda attempts, context: build_messages(
            ctx.task,
            ctx.platform,
            action,
            attempts,
            parent_source=parent.source if parent else None,
            parent_result=parent.outcome() if parent else "",
            context=context + note,
        )
        context = lineage(view, parent, self.context_recent)
        return fit(build, attempts_among(view), context, self.context_tokens)

    def _stats(
        self, tree: SearchTree, in_flight: Sequence[int | None]
    ) -> tuple[dict[int | None, int], dict[int | None, float]]:
        """Visits and summed reward of every subtree (None is the root, the task itself). A call in
        flight is a visit with reward 0 on its parent's path until it lands (virtual loss)."""
        best = max((n.speedup for n in tree.nodes), default=0.0) or 1.0
        visits: dict[int | None, int] = {None: 0}
        value: dict[int | None, float] = {None: 0.0}
        by_id = {n.id: n for n in tree.nodes}
        visited = [(n.id, n.speedup / best) for n in tree.nodes] + [(p, 0.0) for p in in_flight]
        for start, reward in visited:
            cursor: int | None = start
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

    def select(self, tree: SearchTree, in_flight: Sequence[int | None] = ()) -> Node | None:
        """Descend by UCT; stop at the first node whose widening allows one more child. `in_flight`
        holds the parent of each call in flight: a pending child counts as a child and as a visit."""
        in_flight = list(in_flight)
        visits, value = self._stats(tree, in_flight)
        current: Node | None = None
        while True:
            key = current.id if current else None
            usable = [c for c in tree.children(key) if self._expandable(c, tree) or tree.children(c.id)]
            here = current is None or self._expandable(current, tree)
            children = len(tree.children(key)) + in_flight.count(key)
            widen = children < math.ceil(self.widening_k * max(visits[key], 1) ** self.widening_alpha)
            if (widen and here) or not usable:
                return current if here else None
            log_n = math.log(max(visits[key], 1))
            current = max(
                usable, key=lambda c: value[c.id] / visits[c.id] + self.exploration * math.sqrt(log_n / visits[c.id])
            )
