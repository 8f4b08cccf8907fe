"""What every strategy shares: expanding the tree by one model call and one evaluation."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.agents.tree import Action, Node, SearchTree
from harness.budget import Budget
from harness.evaluate import Evaluator
from harness.llm.base import ChatModel, Completion, ModelCallError, extract_code
from harness.platforms.base import Platform
from harness.prompts import build_messages
from harness.tasks import Task


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


def write_atomic(path: Path, text: str) -> None:
    """Write a file whole or not at all: a kill -9 mid-write leaves no torn record to resume from."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{threading.get_ident()}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def _store(folder: Path, payload: dict) -> str:
    """Content-addressed record of a prompt or response; returns its id."""
    text = json.dumps(payload, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    write_atomic(folder / f"{key}.json", text)
    return key


def record_prompt(ctx: AgentContext, node_id: int, messages: list[dict[str, str]]) -> str:
    """Store the exact request for a node; its id is the key of the response cache."""
    return _store(ctx.transcripts, {"model": ctx.model.name, "node": node_id, "messages": messages})


def stored_messages(ctx: AgentContext, prompt_id: str) -> list[dict[str, str]]:
    return json.loads((ctx.transcripts / f"{prompt_id}.json").read_text())["messages"]


def answer(ctx: AgentContext, prompt_id: str, messages: list[dict[str, str]]) -> Completion:
    """The model's answer to a stored request: from the cache on disk if it was ever received (a
    resumed run never pays twice for a call it already made), else a call. Safe in threads."""
    cached = ctx.transcripts / f"response-{prompt_id}.json"
    if cached.is_file():
        return Completion(**json.loads(cached.read_text()))
    completion = ctx.model.complete(messages)
    write_atomic(cached, json.dumps(completion.to_dict()))
    return completion


def attempts_for_prompt(tree: SearchTree, limit: int = 30) -> list[tuple[str | None, str]]:
    """Failed and recent attempts, shown to the model so it does not repeat them."""
    return attempts_among(tree.nodes, limit)


def attempts_among(nodes: list[Node], limit: int = 30) -> list[tuple[str | None, str]]:
    """`attempts_for_prompt` over some nodes (a prefix of the tree: what a prompt was built from)."""
    candidates = [n for n in nodes if n.attempt]
    failed = [n for n in candidates if not n.correct]
    recent = candidates[-limit:]
    chosen = sorted({n.id: n for n in failed[-limit:] + recent}.values(), key=lambda n: n.id)
    return [(n.source, n.outcome()) for n in chosen[-limit:]]


def expand(ctx: AgentContext, action: Action, parent: Node | None, advice: str = "") -> Node:
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
    return land(ctx, node_id, parent.id if parent else None, action, prompt_id, completion, failure, started)


def land(
    ctx: AgentContext,
    node_id: int,
    parent_id: int | None,
    action: Action,
    prompt_id: str,
    completion: Completion,
    failure: str | None,
    started: float,
    extra: dict | None = None,
) -> Node:
    """Evaluate the code of an answer (in the caller's thread: one evaluation at a time) and
    persist its node."""
    source = extract_code(completion.text)
    result = ctx.evaluator.evaluate(ctx.task, source) if source else None
    if failure:
        note = f"model call failed: {failure}"
    else:
        note = "" if source else "no code block in the answer: " + completion.text.strip()[:300]
    node = new_node(node_id, parent_id, action, prompt_id, completion, started, source=source, result=result, note=note)
    node.extra.update(extra or {})
    return ctx.tree.add(node)


def call_model(
    ctx: AgentContext, node_id: int, messages: list[dict[str, str]], started: float
) -> tuple[str, Completion, str | None]:
    """One model call for a node. A provider failure after retries comes back as its message
    (the round is spent and recorded; the strategy decides whether to go on)."""
    prompt_id = record_prompt(ctx, node_id, messages)
    return (prompt_id, *answer_or_failure(ctx, prompt_id, messages, started))


def answer_or_failure(
    ctx: AgentContext, prompt_id: str, messages: list[dict[str, str]], started: float
) -> tuple[Completion, str | None]:
    """`answer`, or an empty completion and the provider's failure message."""
    try:
        return answer(ctx, prompt_id, messages), None
    except ModelCallError as exc:
        return Completion("", ctx.model.name, 0, 0, 0.0, time.monotonic() - started), str(exc)


def new_node(
    node_id: int,
    parent_id: int | None,
    action: Action,
    prompt_id: str,
    completion: Completion,
    started: float,
    **fields,
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
