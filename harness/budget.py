"""Budget: when a search of one task stops (the configuration's `budget` group); it imports nothing above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from harness.errors import require


class Spent(Protocol):
    """What a budget reads of a search (agents.tree.SearchTree): its totals and its nodes' wall times."""

    nodes: list[Any]

    def totals(self) -> dict[str, float]: ...


@dataclass
class Budget:
    """A run of one task stops at the first of these used up; None means no limit. Cost, tokens and
    wall time are known only when a call lands, so a run overspends them by at most one call, or
    by one call per slot with several calls in flight (agent.in_flight); rounds are never overspent."""

    rounds: int = 8
    usd: float | None = None
    tokens: int | None = None
    wall_s: float | None = 900.0

    def __post_init__(self):
        require(
            self,
            "budget",
            {
                "rounds": (self.rounds >= 1, "a whole number of candidates, 1 or more"),
                "usd": (self.usd is None or self.usd >= 0, "a number of dollars, 0 or more, or null"),
                "tokens": (self.tokens is None or self.tokens >= 1, "a whole number of tokens, 1 or more, or null"),
                "wall_s": (self.wall_s is None or self.wall_s > 0, "a number of seconds above 0, or null"),
            },
        )

    def exhausted(self, tree: Spent, in_flight: int = 0) -> str | None:
        """The name of the first budget used up, or None while all remain. Every figure comes
        from the persisted tree, so a resumed search keeps counting where it stopped. Calls
        `in_flight` (sent, not landed) count as rounds; their cost and tokens are not known until
        they land, so a search with N calls in flight overspends usd, tokens or wall_s by at most
        one call per slot (N calls), and by at most one call with a single slot."""
        totals = tree.totals()
        if totals["llm_calls"] + in_flight >= self.rounds:
            return "rounds"
        if self.usd is not None and totals["cost_usd"] >= self.usd:
            return "usd"
        if self.tokens is not None and totals["tokens_in"] + totals["tokens_out"] >= self.tokens:
            return "tokens"
        if self.wall_s is not None and sum(n.wall_s for n in tree.nodes) >= self.wall_s:
            return "wall_s"
        return None
