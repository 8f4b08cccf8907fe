"""Agent strategies end to end on the CPU: node counts, budgets, resume, and real HTTP providers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.agents.analyst import analyse, measurements, profile_table
from harness.agents.base import AgentContext, AgentOutcome, attempts_for_prompt
from harness.agents.refine import next_step
from harness.agents.tree import Action, Node, SearchTree
from harness.budget import Budget
from harness.config import compose, instantiate
from harness.evaluate import EvalResult, Evaluator
from harness.llm.base import Completion, ModelCallError, extract_code
from harness.llm.offline import OfflineModel
from harness.prompts import build_messages
from harness.tasks import Task, resolve_one
from tests.loopback_llm import LoopbackLLM
from tests.test_suite import SILU_SMALL

TASK = resolve_one(str(SILU_SMALL))
ADVICE_HEADING = "## The analyst's recommendations for this version"


class CountingModel:
    """A chat model that records every chat it is asked, to prove a resumed run asks nothing twice."""

    def __init__(self, model):
        self.model, self.name, self.chats = model, model.name, []

    def check_ready(self) -> None:
        self.model.check_ready()

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        self.chats.append(messages)
        return self.model.complete(messages)


class FailingModel:
    name = "failing"

    def check_ready(self) -> None:
        pass

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        raise ModelCallError("RateLimitError: try again later")


@pytest.fixture(scope="module")
def evaluator(make_evaluator) -> Evaluator:
    # Correctness and a token timing budget: the strategies, not the kernels, are under test.
    return make_evaluator(check_seeds=[1], timing_seeds=[101], budget_ms=10, warmup_ms=1)


@pytest.fixture(scope="module")
def kernel_answer(evaluator) -> str:
    """A chat answer holding a correct kernel for TASK (the offline model's first one)."""
    return OfflineModel().complete(build_messages(TASK, evaluator.platform, "new", [])).text


def run_agent(name: str, evaluator: Evaluator, folder: Path, model=None, **budget) -> AgentOutcome:
    """Build the strategy from conf/agent/ and run it on TASK, its tree reopened from `folder`."""
    agent = instantiate(compose(agent=name).agent, "agent")
    ctx = AgentContext(
        TASK,
        evaluator.platform,
        model or OfflineModel(),
        evaluator,
        SearchTree(folder / "tree.jsonl"),
        Budget(**budget),
        folder / "transcripts",
    )
    return agent.run(ctx)


def prompt_of(folder: Path, node: Node) -> list[dict[str, str]]:
    return json.loads((folder / "transcripts" / f"{node.prompt_id}.json").read_text())["messages"]


def persisted(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "tree.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize(
    "agent, actions, stop",
    [
        ("oneshot", ["new"], "done"),
        ("mcts", None, "rounds"),
        ("refine", ["new", "refine", "refine"], "rounds"),
        ("bestofn", ["new", "new", "new"], "rounds"),
    ],
)
def test_strategy_runs_end_to_end_offline(evaluator, tmp_path, agent, actions, stop):
    outcome = run_agent(agent, evaluator, tmp_path, rounds=3)
    nodes = outcome.tree.nodes
    assert outcome.stop_reason == stop
    assert len(nodes) == len(actions or "abc") == len(persisted(tmp_path))
    assert actions is None or [n.action for n in nodes] == actions
    assert outcome.best is not None and outcome.best.correct, [n.outcome() for n in nodes]
    assert outcome.best.speedup == max(n.speedup for n in nodes)
    # Every prompt lists the earlier attempts, so even the deterministic model never repeats one.
    sources = [n.source for n in nodes]
    assert None not in sources and len(set(sources)) == len(nodes)
    assert all(n.result.profile == {} for n in nodes)  # only the analyst asks for profiles


@pytest.mark.slow
def test_analyst_profiles_advises_and_the_generator_reads_the_advice(evaluator, tmp_path):
    outcome = run_agent("analyst", evaluator, tmp_path, rounds=4)
    tree = outcome.tree
    assert outcome.stop_reason == "rounds" and len(tree) == 4 == len(persisted(tmp_path))
    assert [n.action for n in tree.nodes[:3]] == ["new", "analyst", "refine"]
    assert outcome.best is not None and outcome.best.correct
    new, analysis, refine = tree.nodes[:3]
    # The candidate's profile is in its result; the analyst node holds the advice and what it read.
    assert new.result.profile["top"][0]["name"] == "ModelNew.forward"
    assert analysis.parent_id == new.id and analysis.source is None and analysis.result is None
    assert analysis.extra["profile"] == new.result.profile and analysis.extra["advice"]
    analyst_prompt = prompt_of(tmp_path, analysis)
    assert "performance analyst" in analyst_prompt[0]["content"]
    for fact in (
        "## Its measurements",
        "x speedup",
        "roofline share (sol_fraction):",
        "GB/s",
        "`ModelNew.forward` | 5 |",
        new.source.strip(),
    ):
        assert fact in analyst_prompt[1]["content"], fact
    refine_prompt = prompt_of(tmp_path, refine)[1]["content"]
    assert refine.parent_id == new.id and ADVICE_HEADING in refine_prompt
    assert analysis.extra["advice"] in refine_prompt
    # The offline model answers an analyst prompt in plain text, naming what the profile shows.
    assert extract_code(analysis.extra["advice"]) is None
    assert "Largest profile entry" in analysis.extra["advice"]
    assert len({n.source for n in tree.nodes if n.source}) == 3
    # The last round goes to the generator: advice nobody could act on is not bought.
    assert tree.nodes[3].action != "analyst"


@pytest.mark.slow
@pytest.mark.parametrize("agent, first, more", [("mcts", 2, 4), ("analyst", 3, 4)])
def test_resume_continues_the_persisted_tree_without_asking_twice(evaluator, tmp_path, agent, first, more):
    model = CountingModel(OfflineModel())
    started = run_agent(agent, evaluator, tmp_path, model, rounds=first)
    before = persisted(tmp_path)
    assert len(before) == len(model.chats) == first

    same = run_agent(agent, evaluator, tmp_path, model, rounds=first)
    assert same.stop_reason == "rounds" and len(model.chats) == first and persisted(tmp_path) == before

    resumed = run_agent(agent, evaluator, tmp_path, model, rounds=more)
    after = persisted(tmp_path)
    assert resumed.stop_reason == "rounds" and len(model.chats) == more
    assert after[:first] == before and [n["id"] for n in after] == list(range(more))
    assert len({n["prompt_id"] for n in after}) == more == len({json.dumps(chat) for chat in model.chats})
    analysed = [n["parent_id"] for n in after if n["action"] == "analyst"]
    assert len(analysed) == len(set(analysed)) and (agent != "analyst" or analysed)
    assert resumed.best.speedup >= started.best.speedup > 0


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["bestofn", "analyst"])
def test_dollar_budget_stops_within_one_call(evaluator, tmp_path, agent, kernel_answer):
    from harness.llm.client import LiteLLMModel

    # litellm's plain-string mock reports 10 + 20 tokens; a full response prices a realistic call.
    response = {
        "model": "gpt-4o",
        "choices": [{"message": {"role": "assistant", "content": kernel_answer}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500},
    }
    model = LiteLLMModel(name="openai/gpt-4o", num_retries=0, extra={"mock_response": response})
    outcome = run_agent(agent, evaluator, tmp_path, model, rounds=50, usd=0.01)
    costs = [n.cost_usd for n in outcome.tree.nodes]
    assert outcome.stop_reason == "usd"
    assert all(cost > 0 for cost in costs)
    assert sum(costs[:-1]) < 0.01 <= sum(costs) <= 0.01 + max(costs)
    assert outcome.best is not None and outcome.best.correct


@pytest.mark.slow
def test_analyst_through_a_real_http_provider(evaluator, tmp_path, kernel_answer, monkeypatch):

    monkeypatch.setenv("LOOPBACK_KEY", "loopback-secret")
    with LoopbackLLM(lambda messages: kernel_answer) as server:
        model = server.model(
            input_cost_per_token=1e-6,
            output_cost_per_token=2e-6,
            num_retries=0,
        )
        outcome = run_agent("analyst", evaluator, tmp_path, model, rounds=3)
    assert [n.action for n in outcome.tree.nodes] == ["new", "analyst", "refine"]
    assert len(server.requests) == 3 and all(r["auth"] == "Bearer loopback-secret" for r in server.requests)
    roles = [r["body"]["messages"][0]["content"].split("\n")[0] for r in server.requests]
    assert "performance analyst" in roles[1] and roles[0] == roles[2]
    assert ADVICE_HEADING in server.requests[2]["body"]["messages"][1]["content"]
    assert outcome.tree.totals()["cost_usd"] == pytest.approx(3 * (1000 * 1e-6 + 500 * 2e-6))
    assert outcome.best is not None and outcome.best.correct


def _node(node_id: int, verdict: str | None, parent_id: int | None = None, action: str = "new") -> Node:
    result = EvalResult(TASK.id, "cpu", verdict, time_ms=1.0, speedup_vs_eager=2.0) if verdict else None
    source = None if verdict is None else f"# approach: {node_id}\n"
    return Node(node_id, parent_id, action, f"p{node_id}", f"r{node_id}", source, result)


def _tree(tmp_path: Path, *nodes: Node) -> SearchTree:
    tree = SearchTree(tmp_path / "tree.jsonl")
    for node in nodes:
        tree.add(node)
    return tree


def test_a_tree_on_disk_holds_each_action_by_its_value_and_reads_back_actions(tmp_path):
    _tree(tmp_path, _node(0, "correct", action=Action.NEW), _node(1, "correct", 0, Action.REFINE))
    assert [json.loads(line)["action"] for line in (tmp_path / "tree.jsonl").read_text().splitlines()] == [
        "new",
        "refine",
    ]
    assert [n.action for n in SearchTree(tmp_path / "tree.jsonl").nodes] == [Action.NEW, Action.REFINE]
    (tmp_path / "tree.jsonl").write_text(json.dumps({**_node(2, "correct").to_dict(), "action": "rewrite"}) + "\n")
    with pytest.raises(ValueError, match=r"Node\.action is 'rewrite', not one of"):
        SearchTree(tmp_path / "tree.jsonl")


def test_refine_repairs_a_failure_up_to_its_limit_then_starts_anew(tmp_path):
    tree = _tree(tmp_path, _node(0, "compile_error"))
    assert next_step(tree, max_repairs=2) == ("repair", tree.nodes[0])
    tree.add(_node(1, "incorrect", 0, "repair"))
    assert next_step(tree, max_repairs=2) == ("repair", tree.nodes[1])
    tree.add(_node(2, "runtime_error", 1, "repair"))
    assert next_step(tree, max_repairs=2) == ("new", None)
    tree.add(_node(3, "correct"))
    tree.add(_node(4, "incorrect", 3, "refine"))
    assert next_step(tree, max_repairs=2) == ("repair", tree.nodes[4])
    tree.add(_node(5, None, 4, "repair"))  # an answer without code cannot be repaired
    assert next_step(tree, max_repairs=2) == ("refine", tree.nodes[3])


def test_analyst_nodes_are_not_attempts_and_advice_is_quoted_only_when_given(tmp_path, evaluator):
    tree = _tree(tmp_path, _node(0, "correct"), _node(1, None, 0, "analyst"))
    assert attempts_for_prompt(tree) == [(tree.nodes[0].source, tree.nodes[0].outcome())]
    parent = tree.nodes[0]
    plain = build_messages(TASK, evaluator.platform, "refine", [], parent.source, parent.outcome())[1]["content"]
    advised = build_messages(
        TASK, evaluator.platform, "refine", [], parent.source, parent.outcome(), advice="Unroll by 4."
    )[1]["content"]
    assert ADVICE_HEADING not in plain and f"```\n\n{ADVICE_HEADING}\nUnroll by 4.\n\nMake this" in advised
    assert advised.replace(f"\n{ADVICE_HEADING}\nUnroll by 4.\n", "") == plain


def test_a_failed_analyst_call_is_recorded_and_the_generator_goes_on(tmp_path, evaluator):
    correct = _node(0, "correct")
    correct.result.profile = {"time": "host", "forward_calls": 5, "total_us": 10.0, "top": []}
    tree = _tree(tmp_path, correct)
    ctx = AgentContext(TASK, evaluator.platform, FailingModel(), evaluator, tree, Budget(), tmp_path / "transcripts")
    analysis = analyse(ctx, correct)
    assert analysis.action == "analyst" and analysis.parent_id == 0 and analysis.extra["advice"] == ""
    assert "failed: RateLimitError" in analysis.note and analysis.cost_usd == 0
    assert len(SearchTree(tmp_path / "tree.jsonl")) == 2


@pytest.mark.parametrize("profile", [{}, {"error": "RuntimeError: CUPTI unavailable"}, {"top": "forged"}, "forged"])
def test_a_missing_or_malformed_profile_reads_as_a_sentence(profile):
    text = profile_table(profile)
    assert text.startswith("No profile (") and "|" not in text


def test_wall_budget_counts_the_persisted_rounds_so_a_resume_keeps_counting(tmp_path):
    from harness.agents.tree import Node, SearchTree
    from harness.budget import Budget

    tree = SearchTree(tmp_path / "tree.jsonl")
    for i in range(2):
        tree.add(Node(i, None, "new", f"p{i}", f"r{i}", None, None, wall_s=0.6))
    budget = Budget(rounds=10, wall_s=1.0)
    assert budget.exhausted(SearchTree(tmp_path / "tree.jsonl")) == "wall_s"
    assert Budget(rounds=10, wall_s=2.0).exhausted(tree) is None


def test_the_analyst_reads_a_gpu_calls_host_time_beside_its_kernel_time():
    task = Task(id="t", reference_path=Path("reference.py"))
    gpu = EvalResult(
        "t", "triton", "correct", time_ms=0.09, host_ms=0.085, env={"device": "cuda", "asynchronous": True}
    )
    assert "host time per call: 0.085 ms" in measurements(task, gpu, None)
    cpu = EvalResult("t", "cpu", "correct", time_ms=0.09, host_ms=0.09, env={"device": "cpu"})
    assert "host time" not in measurements(task, cpu, None)  # on a CPU the two are one clock
