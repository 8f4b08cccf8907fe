"""MCTS with several expansions in flight and lineage context: calls that overlap, budgets kept,
virtual loss, resume after an interrupted in-flight run, prompts within their token budget."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.agents.base import AgentContext, AgentOutcome
from harness.agents.mcts import MCTS
from harness.agents.tree import Node, SearchTree
from harness.budget import Budget
from harness.config import compose, instantiate
from harness.errors import ForgeBenchError
from harness.evaluate import EvalResult
from harness.llm.base import Completion
from harness.llm.offline import OfflineModel
from harness.prompts import estimate_tokens
from harness.tasks import resolve_one
from tests.loopback_llm import LoopbackLLM
from tests.test_suite import RMSNORM_SMALL, suite, suite_command, user_env

TASK = resolve_one("silu_and_mul_qwen")


class CountingModel:
    """The offline model, counting the chats it is asked (from any thread)."""

    name = "offline"

    def __init__(self):
        self.chats: list[list[dict[str, str]]] = []

    def check_ready(self) -> None:
        pass

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        self.chats.append(messages)
        return OfflineModel().complete(messages)


class ServerAnswers:
    """What the loopback server answers (the offline model's reply, after `delay_s`), counting the
    requests it holds at once; requests numbered `held_from` and later wait until `release()`."""

    def __init__(self, delay_s: float = 0.0, held_from: int | None = None):
        self.delay_s, self.held_from = delay_s, held_from
        self.lock, self.released = threading.Lock(), threading.Event()
        self.arrived = self.active = self.most_at_once = 0

    def __call__(self, messages: list[dict[str, str]]) -> str:
        with self.lock:
            self.arrived += 1
            number = self.arrived
            self.active += 1
            self.most_at_once = max(self.most_at_once, self.active)
        try:
            if self.held_from is not None and number >= self.held_from:
                self.released.wait(600)
            time.sleep(self.delay_s)
            return OfflineModel().complete(messages).text
        finally:
            with self.lock:
                self.active -= 1

    def release(self) -> None:
        self.released.set()


class Interrupting:
    """The evaluator, raising on its `at`-th evaluation: a search stopped with calls in flight."""

    def __init__(self, evaluator: SchedulingEvaluator, at: int):
        self._evaluator, self.platform, self.at, self.calls = evaluator, evaluator.platform, at, 0

    def evaluate(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at:
            time.sleep(0.5)  # the call sent just before is under way, as it would be in a real run
            raise KeyboardInterrupt
        return self._evaluator.evaluate(*args, **kwargs)


class SchedulingEvaluator:
    """Stands in for the evaluator where the subject is the search's scheduling (slots, budgets,
    overlap, the journal), not a kernel's verdict: each evaluation takes `seconds` in the agent's
    thread, as a real one would while other calls are in flight, and reads a compiling kernel as
    correct at a speedup drawn from its source. Real evaluations of the same search are in the kill -9
    test below and tests/agents/test_agents.py; kernels are judged in tests/evaluate/."""

    def __init__(self, seconds: float = 0.3):
        self.platform = instantiate(compose(platform="cpu").platform, "platform")
        self.seconds = seconds

    def evaluate(self, task, source: str, **_) -> EvalResult:
        time.sleep(self.seconds)
        try:
            compile(source, "candidate.py", "exec")
        except SyntaxError as exc:
            return EvalResult(task.id, self.platform.name, "compile_error", reason=str(exc))
        speedup = 0.5 + int(hashlib.sha256(source.encode()).hexdigest()[:4], 16) / 0xFFFF * 2
        return EvalResult(task.id, self.platform.name, "correct", time_ms=1.0 / speedup, speedup_vs_eager=speedup)


@pytest.fixture(scope="module")
def evaluator() -> SchedulingEvaluator:
    return SchedulingEvaluator()


def mcts(**settings) -> MCTS:
    """The strategy as conf/agent/mcts.yaml builds it, with overrides."""
    return instantiate(compose(agent="mcts", overrides=[f"agent.{k}={v}" for k, v in settings.items()]).agent, "agent")


def context(evaluator, folder: Path, model, **budget) -> AgentContext:
    tree = SearchTree(folder / "tree.jsonl")
    return AgentContext(TASK, evaluator.platform, model, evaluator, tree, Budget(**budget), folder / "transcripts")


def run(agent: MCTS, evaluator, folder: Path, model, **budget) -> AgentOutcome:
    return agent.run(context(evaluator, folder, model, **budget))


def stored(folder: Path, prompt_id: str) -> list[dict[str, str]]:
    return json.loads((folder / "transcripts" / f"{prompt_id}.json").read_text())["messages"]


def chat_key(messages: list[dict[str, str]]) -> str:
    return json.dumps(messages, sort_keys=True)


def rebuilt(agent, ctx, node):
    """The chat `node`'s model call was sent, rebuilt from the tree alone."""
    view = ctx.tree.nodes[: node.extra["seen"]]
    parent = next((n for n in view if n.id == node.parent_id), None)
    return agent.messages(ctx, view, parent, node.action, node.extra.get("sibling", 0))


def test_calls_overlap_through_a_real_http_provider_and_rounds_are_kept(evaluator, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPBACK_KEY", "loopback-secret")
    answers = ServerAnswers(delay_s=0.5)
    agent = mcts(in_flight=3)
    with LoopbackLLM(answers) as server:
        ctx = context(evaluator, tmp_path, server.model(num_retries=0), rounds=6)
        started = time.monotonic()
        outcome = agent.run(ctx)
        elapsed = time.monotonic() - started
    nodes = outcome.tree.nodes
    assert outcome.stop_reason == "rounds" and len(nodes) == 6 == len(server.requests)
    assert answers.most_at_once >= 2  # the server held several requests at the same time
    assert sorted(n.id for n in nodes) == list(range(6)) and not outcome.tree.unlanded()
    assert outcome.best is not None and outcome.best.correct
    # The three first calls left together from an empty tree; each was told its place among them,
    # so the offline model wrote three different kernels, not one kernel three times.
    first = sorted(nodes, key=lambda n: n.id)[:3]
    assert [n.extra["sibling"] for n in first] == [0, 1, 2]
    assert len({n.source.splitlines()[0] for n in first}) == 3
    # The exact chat each call sent is the stored one and is rebuilt from the tree alone.
    sent = Counter(chat_key(r["body"]["messages"]) for r in server.requests)
    assert sent == Counter(chat_key(stored(tmp_path, n.prompt_id)) for n in nodes)
    assert all(rebuilt(agent, ctx, n) == stored(tmp_path, n.prompt_id) for n in nodes)
    # wall_s counts the search's time once, not the overlapping calls' time N times.
    assert sum(n.wall_s for n in nodes) <= elapsed


@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_rounds_are_kept_exactly_with_more_slots_than_rounds_left(evaluator, tmp_path, rounds):
    model = CountingModel()
    outcome = run(mcts(in_flight=4), evaluator, tmp_path, model, rounds=rounds)
    lines = (tmp_path / "tree.jsonl").read_text().splitlines()
    assert outcome.stop_reason == "rounds" and len(outcome.tree) == len(lines) == len(model.chats) == rounds


def test_resume_after_an_interrupted_in_flight_run_asks_nothing_twice(evaluator, tmp_path):
    model = CountingModel()
    with pytest.raises(KeyboardInterrupt):
        run(mcts(in_flight=3), Interrupting(evaluator, at=2), tmp_path, model, rounds=6)
    interrupted = SearchTree(tmp_path / "tree.jsonl")
    waiting = interrupted.unlanded()
    answered = [d for d in waiting if (tmp_path / "transcripts" / f"response-{d.prompt_id}.json").is_file()]
    assert len(interrupted) == 1 and len(waiting) == 3 == len(answered) == len(model.chats) - 1

    outcome = run(mcts(in_flight=3), evaluator, tmp_path, model, rounds=6)
    nodes = outcome.tree.nodes
    assert outcome.stop_reason == "rounds" and len(model.chats) == 6  # the three answers on disk were reused
    assert sorted(n.id for n in nodes) == list(range(6)) and len({n.prompt_id for n in nodes}) == 6
    assert [n.id for n in nodes[1:4]] == [d.id for d in waiting]  # the journaled calls land first
    assert len((tmp_path / "tree.jsonl").read_text().splitlines()) == 6 and not outcome.tree.unlanded()


@pytest.mark.slow
def test_kill_9_with_calls_in_flight_then_the_same_command_resumes(tmp_path):
    """The suite through the loopback provider, killed with calls in flight: some answered (on
    disk, not yet evaluated), some not (the server holds every request from the 4th on). Resumed,
    it asks only what was never answered, and the rounds still to choose."""
    tmp_path.chmod(0o711)
    answers = ServerAnswers(delay_s=0.05, held_from=4)
    folder = tmp_path / "resumable" / "tasks" / "rmsnorm_small"
    with LoopbackLLM(answers) as server:
        options = [
            "--agent=mcts",
            "--model=openai/loopback-coder",
            f"--tasks={RMSNORM_SMALL}",
            "--rounds=6",
            *("--override", "agent.in_flight=3", "--override", "run_dir=resumable"),
            *("--override", f"model.api_base={server.api_base}", "--override", "model.api_key_env=LOOPBACK_KEY"),
        ]
        victim = subprocess.Popen(
            suite_command(*options),
            cwd=tmp_path,
            env=user_env(LOOPBACK_KEY="loopback-secret"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        tree_path, journal = folder / "tree.jsonl", folder / "tree.inflight.jsonl"
        lines = lambda path: len(path.read_text().splitlines()) if path.is_file() else 0
        deadline = time.monotonic() + 300
        # Node 0 landed and the 4th call (the first the server holds) journaled: typically while
        # node 1, its answer on disk, is being evaluated.
        while time.monotonic() < deadline and (lines(tree_path) < 1 or lines(journal) < 4):
            time.sleep(0.02)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        killed = SearchTree(tree_path)
        sent_before = len(server.requests)
        survivors = tree_path.read_text().splitlines()
        waiting = killed.unlanded()
        answered = {d.id for d in waiting if (folder / "transcripts" / f"response-{d.prompt_id}.json").is_file()}
        unanswered = [d for d in waiting if d.id not in answered]
        assert 1 <= len(killed) < 6 and unanswered, (len(killed), waiting, answered)

        answers.release()
        done = suite(tmp_path, *options, LOOPBACK_KEY="loopback-secret")
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = [json.loads(line) for line in tree_path.read_text().splitlines()]
    assert sorted(n["id"] for n in nodes) == list(range(6))  # none lost, none duplicated
    assert tree_path.read_text().splitlines()[: len(survivors)] == survivors
    assert len({n["prompt_id"] for n in nodes}) == 6
    # After the kill the server was asked exactly the journaled calls it had not answered (each once)
    # and the rounds still to choose; no answer that had reached the disk was bought again.
    journaled = {d.id for d in killed.dispatches}
    expected = Counter(chat_key(stored(folder, d.prompt_id)) for d in unanswered)
    expected.update(chat_key(stored(folder, n["prompt_id"])) for n in nodes if n["id"] not in journaled)
    assert Counter(chat_key(r["body"]["messages"]) for r in server.requests[sent_before:]) == expected
    assert len(server.requests) - sent_before == len(unanswered) + 6 - len(journaled)


def _node(node_id: int, parent_id: int | None, speedup: float | None, source_chars: int = 40) -> Node:
    verdict = "correct" if speedup else "incorrect"
    result = EvalResult(TASK.id, "cpu", verdict, time_ms=1.0, speedup_vs_eager=speedup)
    source = f"# approach: version {node_id}\n" + f"// body of node {node_id}\n" * (source_chars // 20)
    action = "new" if parent_id is None else ("refine" if speedup else "repair")
    return Node(node_id, parent_id, action, f"p{node_id}", f"r{node_id}", source, result)


def _tree(tmp_path: Path, *nodes: Node) -> SearchTree:
    tree = SearchTree(tmp_path / "tree.jsonl")
    for node in nodes:
        tree.add(node)
    return tree


def test_virtual_loss_spreads_selection_over_the_leaves(tmp_path):
    tree = _tree(tmp_path, _node(0, None, 2.0), _node(1, None, 1.9))
    agent = MCTS()
    first = agent.select(tree)
    assert first.id == 0 and agent.select(tree) == first  # without a call in flight: the same leaf again
    assert agent.select(tree, [first.id]).id == 1  # the pending child is a visit with reward 0
    picks, in_flight = [], []
    for _ in range(4):
        pick = agent.select(tree, in_flight)
        picks.append(pick.id if pick else None)
        in_flight.append(picks[-1])
    assert len(set(picks)) == 3, picks  # both leaves and a new kernel from the root


def test_in_flight_must_be_a_positive_integer(tmp_path, evaluator):
    with pytest.raises(ForgeBenchError, match=r"agent\.in_flight is 0; it must be a positive integer"):
        run(mcts(in_flight=0), evaluator, tmp_path, CountingModel(), rounds=2)


def _lineage_tree(tmp_path: Path) -> SearchTree:
    """A lineage 0 -> 1 -> 2 -> 3 (3 to be refined), the best kernel 4 elsewhere, recent 5 and 6."""
    size = 4000
    return _tree(
        tmp_path,
        _node(0, None, 1.1, size),
        _node(1, 0, 1.2, size),
        _node(4, None, 9.0, size),
        _node(2, 1, 1.3, size),
        _node(3, 2, 1.4, size),
        _node(5, None, None, size),
        _node(6, 4, 2.0, size),
    )


def _context_of(evaluator, tmp_path: Path, tokens: int) -> str:
    tree = _lineage_tree(tmp_path)
    messages = MCTS(context_tokens=tokens, context_recent=2).messages(
        context(evaluator, tmp_path, CountingModel()), tree.nodes, tree.nodes[4], "refine"
    )
    assert messages[1]["content"].count("// body of node 3") == 200  # the version to improve, in full
    return messages


def test_lineage_context_holds_best_ancestors_and_recent_nodes(evaluator, tmp_path):
    user = _context_of(evaluator, tmp_path, 10**6)[1]["content"]
    for label in ("Best so far, node 4", "Ancestor of the version to improve, node 0", "Recent attempt, node 6"):
        assert f"### {label}" in user, label
    assert all(f"// body of node {i}" in user for i in (0, 1, 2, 4, 5, 6))


def test_context_is_cut_to_its_token_budget_oldest_ancestor_first_and_the_best_kept(evaluator, tmp_path):
    full = estimate_tokens(_context_of(evaluator, tmp_path / "full", 10**6))
    budget = full - 3500  # each body is 1000 tokens: room for the best's and the nearest ancestor's
    messages = _context_of(evaluator, tmp_path / "cut", budget)
    user = messages[1]["content"]
    assert estimate_tokens(messages) <= budget
    assert "// body of node 4" in user and "// body of node 2" in user  # the best, the nearest ancestor
    assert not any(f"// body of node {i}" in user for i in (0, 1, 5, 6))  # recent, then oldest ancestors
    # A node whose code was left out keeps its outcome line.
    assert "### Ancestor of the version to improve, node 0 (`approach: version 0`): correct" in user
    assert "### Recent attempt, node 5 (`approach: version 5`): incorrect" in user


def test_a_budget_below_the_fixed_prompt_keeps_the_task_and_the_version_to_improve(evaluator, tmp_path):
    user = _context_of(evaluator, tmp_path, 100)[1]["content"]
    assert "## Task `silu_and_mul_qwen`" in user and "### Best so far, node 4" in user
    assert not any(f"// body of node {i}" in user for i in (0, 1, 2, 4, 5, 6))
