"""Strategy `oneshot`: one answer, evaluated once."""

from __future__ import annotations

from harness.agents.base import AgentContext, AgentOutcome, expand
from harness.agents.tree import Action


class OneShot:
    name = "oneshot"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        if not ctx.tree.nodes and not ctx.budget.exhausted(ctx.tree):
            expand(ctx, Action.NEW, None)
        return AgentOutcome(ctx.tree.best(), "done", ctx.tree)
