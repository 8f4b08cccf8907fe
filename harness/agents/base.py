"""What every strategy shares: the budget, and expanding the tree by one model call and one evaluation."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from harness.agents.tree import Node, SearchTree
from harness.evaluate import Evaluator
from harness.llm.base import ChatModel, Completion, ModelCallError, extract_code
from harness.platforms.base import Platform
from harness.prompts import build_messages
from harness.tasks import Task


@dataclass
class Budget:
    rounds: int = 8
    usd: float | None = None
    tokens: int | None = None
    wall_s: float | None = None

    def exhausted(self, tree: SearchTree) -> str | None:
        """The name of the first budget used up, or None while all remain. Every figure comes
        from the persisted tree, so a resumed search keeps counting where it stopped."""
        totals = tree.totals()
        if totals["llm_calls"] >= self.rounds:
            return "rounds"
        if self.usd is not None and totals["cost_usd"] >= self.usd:
            return "usd"
        if self.tokens is not None and totals["tokens_in"] + totals["tokens_out"] >= self.tokens:
            return "tokens"
        if self.wall_s is not None and sum(n.wall_s for n in tree.nodes) >= self.wall_s:
            return "wall_s"
        return None


@dataclass
class AgentContext:
    task: Task
    platform: Platform
    model: ChatModel
    evaluator: Evaluator
    tree: SearchTree
    budget: Budget
    transcripts: Path


@dataclass
class AgentOutcome:
    best: Node | None
    stop_reason: str
    tree: SearchTree


def _store(folder: Path, payload: dict) -> str:
    """Content-addressed record of a prompt or response; returns its id."""
    text = json.dumps(payload, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key}.json").write_text(text)
    return key


def ask(ctx: AgentContext, node_id: int, messages: list[dict[str, str]]) -> tuple[str, Completion]:
    """Call the model, or reuse the answer on disk for this node's exact request (a resumed run
    never pays twice for a call it already made)."""
    prompt_id = _store(ctx.transcripts, {"model": ctx.model.name, "node": node_id, "messages": messages})
    cached = ctx.transcripts / f"response-{prompt_id}.json"
    if cached.is_file():
        return prompt_id, Completion(**json.loads(cached.read_text()))
    completion = ctx.model.complete(messages)
    cached.write_text(json.dumps(completion.to_dict()))
    return prompt_id, completion


def attempts_for_prompt(tree: SearchTree, limit: int = 30) -> list[tuple[str | None, str]]:
    """Failed and recent attempts, shown to the model so it does not repeat them."""
    candidates = [n for n in tree.nodes if n.action != "analyst"]  # an analyst's advice is no attempt
    failed = [n for n in candidates if not n.correct]
    recent = candidates[-limit:]
    chosen = sorted({n.id: n for n in failed[-limit:] + recent}.values(), key=lambda n: n.id)
    return [(n.source, n.outcome()) for n in chosen[-limit:]]


def expand(ctx: AgentContext, action: str, parent: Node | None, advice: str = "") -> Node:
    """One round: build the prompt, ask the model, evaluate its code, persist the node.
    `advice` is an analyst's text on the parent, quoted in the prompt."""
    started = time.monotonic()
    messages = build_messages(
        ctx.task,
        ctx.platform,
        action,
        attempts_for_prompt(ctx.tree),
        parent_source=parent.source if parent else None,
        parent_result=parent.outcome() if parent else "",
        advice=advice,
    )
    node_id = ctx.tree.next_id()
    prompt_id, completion, failure = call_model(ctx, node_id, messages, started)
    source = extract_code(completion.text)
    result = ctx.evaluator.evaluate(ctx.task, source) if source else None
    if failure:
        note = f"model call failed: {failure}"
    else:
        note = "" if source else "no code block in the answer: " + completion.text.strip()[:300]
    parent_id = parent.id if parent else None
    return ctx.tree.add(
        new_node(node_id, parent_id, action, prompt_id, completion, started, source=source, result=result, note=note)
    )


def call_model(
    ctx: AgentContext, node_id: int, messages: list[dict[str, str]], started: float
) -> tuple[str, Completion, str | None]:
    """One model call for a node. A provider failure after retries comes back as its message
    (the round is spent and recorded; the strategy decides whether to go on)."""
    try:
        prompt_id, completion = ask(ctx, node_id, messages)
        return prompt_id, completion, None
    except ModelCallError as exc:
        return "", Completion("", ctx.model.name, 0, 0, 0.0, time.monotonic() - started), str(exc)


def new_node(
    node_id: int, parent_id: int | None, action: str, prompt_id: str, completion: Completion, started: float, **fields
) -> Node:
    """A tree node carrying the call's ids, cost and tokens, and the round's wall time."""
    return Node(
        id=node_id,
        parent_id=parent_id,
        action=action,
        prompt_id=prompt_id,
        response_id=f"response-{prompt_id}",
        cost_usd=completion.cost_usd,
        tokens_in=completion.tokens_in,
        tokens_out=completion.tokens_out,
        wall_s=time.monotonic() - started,
        **fields,
    )
