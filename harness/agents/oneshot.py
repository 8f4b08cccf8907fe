"""Strategy `oneshot`: one answer, evaluated once."""

from __future__ import annotations

import time

from harness.agents.base import AgentContext, AgentOutcome, expand


class OneShot:
    name = "oneshot"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        started = time.monotonic()
        if not ctx.tree.nodes and not ctx.budget.exhausted(ctx.tree, started):
            expand(ctx, "new", None)
        return AgentOutcome(ctx.tree.best(), "done", ctx.tree)
