"""Lineage context for an expansion (Kernel Forge): the best node so far, the ancestors of the node
being refined and the most recent nodes, with their code, trimmed to a token budget.

The least useful code goes first: recent nodes' (oldest first), then ancestors' (oldest first), then
the best node's; a node whose code is left out keeps its outcome line. Only then are the oldest
lines of the attempts list dropped. The task, the platform notes and the version to improve are
never dropped: when they alone exceed the budget, the prompt holds them and the outcome lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from harness.agents.tree import Node
from harness.prompts import approach_line, context_section, estimate_tokens

Messages = list[dict[str, str]]
Attempts = list[tuple[str | None, str]]


@dataclass(frozen=True)
class Lineage:
    entries: list[tuple[str, Node]]  # (label, node) in the order the prompt shows them
    drop_order: list[int]  # indexes into entries whose code may be left out, least useful first

    def section(self, with_code: set[int]) -> str:
        return context_section(
            [
                (label, node.source if i in with_code else None, node.outcome())
                for i, (label, node) in enumerate(self.entries)
            ]
        )


def _label(kind: str, node: Node) -> str:
    return f"{kind}, node {node.id} (`{approach_line(node.source)}`)"


def lineage(view: list[Node], parent: Node | None, recent: int) -> Lineage:
    """The context for expanding `parent` (None: a new kernel) from the nodes in `view`, which
    are in landing order. The parent itself is not an entry: its prompt shows it in full."""
    candidates = [n for n in view if n.attempt]
    by_id = {n.id: n for n in candidates}
    best = max((n for n in candidates if n.correct), key=lambda n: n.speedup, default=None)
    ancestors: list[Node] = []  # oldest first
    cursor = by_id.get(parent.parent_id) if parent else None
    while cursor is not None:
        ancestors.insert(0, cursor)
        cursor = by_id.get(cursor.parent_id)
    shown = {parent.id if parent else None}
    best_entries = [best] if best is not None and best.id not in shown else []
    shown |= {n.id for n in best_entries}
    ancestor_entries = [n for n in ancestors if n.id not in shown]
    shown |= {n.id for n in ancestor_entries}
    recent_entries = [n for n in candidates if n.id not in shown][-recent:] if recent > 0 else []
    entries = (
        [(_label("Best so far", n), n) for n in best_entries]
        + [(_label("Ancestor of the version to improve", n), n) for n in ancestor_entries]
        + [(_label("Recent attempt", n), n) for n in recent_entries]
    )
    first_ancestor, first_recent = len(best_entries), len(best_entries) + len(ancestor_entries)
    order = [*range(first_recent, len(entries)), *range(first_ancestor, first_recent), *range(first_ancestor)]
    return Lineage(entries, [i for i in order if entries[i][1].source is not None])


def fit(build: Callable[[Attempts, str], Messages], attempts: Attempts, context: Lineage, limit: int) -> Messages:
    """The prompt `build(attempts, context_section)` cut to `limit` estimated tokens, the least
    useful items left out first (see the module's docstring)."""
    with_code = set(context.drop_order)
    attempts = list(attempts)
    messages = build(attempts, context.section(with_code))
    for index in context.drop_order:
        if estimate_tokens(messages) <= limit:
            return messages
        with_code.discard(index)
        messages = build(attempts, context.section(with_code))
    while attempts and estimate_tokens(messages) > limit:
        attempts.pop(0)  # listed oldest first
        messages = build(attempts, context.section(with_code))
    return messages
