"""Strategy `bestofn`: N new kernels, N = budget.rounds, the fastest correct one kept.

Each prompt lists the earlier attempts, so a deterministic model (the offline one) also gives N
different answers rather than one answer N times.
"""

from __future__ import annotations

from harness.agents.base import AgentContext, AgentOutcome, expand
from harness.agents.tree import Action


class BestOfN:
    name = "bestofn"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        while (reason := ctx.budget.exhausted(ctx.tree)) is None:
            expand(ctx, Action.NEW, None)
        return AgentOutcome(ctx.tree.best(), reason, ctx.tree)
