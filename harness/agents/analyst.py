"""Strategy `analyst` (KForge): a generator writes and repairs kernels; an analyst reads the best
version's measurements and profile and tells the generator what to change in its next refine.

Every model call is a round, the analyst's included, so strategies compared at equal rounds made
equal calls. The analysis of a candidate is a tree node (action `analyst`, its parent the candidate,
advice and profile in `extra`), so a resumed run re-uses it rather than asking again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from string import Template

from harness.agents.base import AgentContext, AgentOutcome, call_model, expand, new_node
from harness.agents.refine import next_step
from harness.agents.tree import Action, Node, SearchTree
from harness.evaluate import EvalResult, Evaluator
from harness.prompts import PROMPTS_DIR, platform_notes, task_section
from harness.tasks import Task


class _Profiling:
    """The evaluator, asked for the profile of every correct candidate, so none is run twice."""

    def __init__(self, evaluator: Evaluator):
        self._evaluator = evaluator

    def evaluate(self, task: Task, candidate_source: str) -> EvalResult:
        return self._evaluator.evaluate(task, candidate_source, profile=True)

    def __getattr__(self, name: str):
        return getattr(self._evaluator, name)


def measurements(task: Task, result: EvalResult, ceilings: dict | None) -> str:
    """The candidate's time against its baselines, the roofline floor and the measured ceilings."""
    lines = [f"- median time: {result.time_ms:.4g} ms"]
    if result.host_ms is not None and result.env.get("asynchronous"):
        lines.append(
            f"- host time per call: {result.host_ms:.4g} ms (Python and launches; when it nears the median "
            "time, the GPU waited for the host and fewer launches or host-side work pay more than kernel tuning)"
        )
    for name, baseline_ms in sorted(result.baselines.items()):
        speedup = baseline_ms / result.time_ms
        lines.append(f"- {name}: {baseline_ms:.4g} ms (this version: {speedup:.3g}x speedup)")
    if result.sol_fraction is not None:
        floor_ms = result.sol_fraction * result.time_ms
        lines.append(
            f"- roofline share (sol_fraction): {result.sol_fraction:.0%}; at the measured ceilings the task's "
            f"bytes and FLOPs need {floor_ms:.4g} ms"
        )
    else:
        lines.append(
            "- roofline share: unknown (the task records no bytes moved or FLOPs, or no ceilings were measured)"
        )
    seconds = result.time_ms / 1e3
    if task.bytes_moved and ceilings:
        achieved = task.bytes_moved / seconds / 1e9
        lines.append(f"- bandwidth: {achieved:.3g} GB/s of a measured {ceilings['copy_gbps']:.3g} GB/s copy rate")
    if task.flops and ceilings:
        achieved, peak = task.flops / seconds / 1e9, ceilings["matmul_tflops"] * 1e3
        lines.append(f"- compute: {achieved:.3g} GFLOP/s of a measured {peak:.3g} GFLOP/s matmul rate")
    return "\n".join(lines)


def _short(name: str, limit: int = 120) -> str:
    """A kernel name cut to fit a table row (C++ template names run to hundreds of characters)."""
    return name if len(name) <= limit else name[: limit - 3] + "..."


def profile_table(profile: dict) -> str:
    """The profile's top ops and kernels as a table, or a line saying why there is none."""
    try:
        rows = [
            f"| `{_short(e['name'])}` | {e['calls']} | {e['self_us']:.1f} | {e['share']:.0%} |" for e in profile["top"]
        ]
        scope = f"Self {profile['time']} time over {profile['forward_calls']} calls of forward."
    except (KeyError, TypeError, ValueError):
        reason = profile.get("error") if isinstance(profile, dict) else None
        ncu = ncu_table(profile.get("ncu")) if isinstance(profile, dict) else []
        return "\n".join([f"No profile ({reason or 'none usable was recorded'}).", *ncu])
    if profile["time"] == "host":
        scope += " A kernel called through ctypes is no PyTorch op: its time is `ModelNew.forward`'s self time."
    table = [scope, "", "| op or kernel | calls | self time (us) | share |", "|---|---|---|---|", *rows]
    return "\n".join(table + ncu_table(profile.get("ncu")))


def _cell(kernel: dict, key: str) -> str:
    value = kernel.get(key)
    return f"{value:.0f}" if isinstance(value, float) else str(value or "?")


def ncu_table(ncu: dict | None) -> list[str]:
    """Nsight Compute's metrics per kernel (harness/evaluate/ncu.py), or why there are none; nothing
    where none was asked for (a CPU)."""
    if not isinstance(ncu, dict):
        return []
    kernels = ncu.get("kernels")
    if not isinstance(kernels, list) or not kernels:
        return ["", f"Nsight Compute: no metrics ({ncu.get('error') or 'none recorded'})."]
    rows = [
        f"| `{_short(str(k.get('kernel', '?')), 80)}` | {k['time_ns'] / 1e3:.1f} | {_cell(k, 'dram_pct')} | "
        f"{_cell(k, 'sm_pct')} | {_cell(k, 'occupancy_pct')} | {_cell(k, 'l2_hit_pct')} | {_cell(k, 'registers')} | "
        f"{_cell(k, 'grid')} | {_cell(k, 'block')} |"
        for k in kernels
        if isinstance(k, dict) and isinstance(k.get("time_ns"), float)
    ]
    return [
        "",
        "Nsight Compute, one call of forward, per kernel (percentages of the device's sustained peak; "
        "occupancy is achieved warps of the maximum):",
        "",
        "| kernel | time (us) | DRAM % | SM % | occupancy % | L2 hit % | registers | grid | block |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]


def analyst_messages(ctx: AgentContext, node: Node, profile: dict) -> list[dict[str, str]]:
    """The analyst's chat about one correct candidate (prompts are data: analyst*.md)."""
    user = Template((PROMPTS_DIR / "analyst.md").read_text()).substitute(
        task=task_section(ctx.task, ctx.platform),
        platform_notes=platform_notes(ctx.platform),
        source=(node.source or "").strip(),
        measurements=measurements(ctx.task, node.result, ctx.evaluator.ceilings()),
        profile=profile_table(profile),
    )
    system = (PROMPTS_DIR / "analyst_system.md").read_text().strip()
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def analysis_of(tree: SearchTree, node: Node) -> Node | None:
    return next((n for n in tree.nodes if n.action == Action.ANALYST and n.parent_id == node.id), None)


def analyse(ctx: AgentContext, node: Node) -> Node:
    """Ask the analyst about a correct candidate and persist its answer, taken as text whatever it
    holds (a code block in it is part of the advice, never a candidate)."""
    started = time.monotonic()
    profile = node.result.profile or ctx.evaluator.evaluate(ctx.task, node.source).profile
    node_id = ctx.tree.next_id()
    prompt_id, completion, failure = call_model(ctx, node_id, analyst_messages(ctx, node, profile), started)
    note = f"analyst call on node {node.id} failed: {failure}" if failure else f"analyst advice on node {node.id}"
    return ctx.tree.add(
        new_node(
            node_id,
            node.id,
            Action.ANALYST,
            prompt_id,
            completion,
            started,
            source=None,
            result=None,
            note=note,
            extra={"advice": completion.text.strip(), "profile": profile},
        )
    )


@dataclass
class Analyst:
    max_repairs: int = 2  # generator repairs in a row along one lineage, as in `refine`
    name: str = "analyst"

    def run(self, ctx: AgentContext) -> AgentOutcome:
        ctx = replace(ctx, evaluator=_Profiling(ctx.evaluator))
        while (reason := ctx.budget.exhausted(ctx.tree)) is None:
            action, parent = next_step(ctx.tree, self.max_repairs)
            advice = ""
            if action == Action.REFINE:
                analysis = analysis_of(ctx.tree, parent)
                # Advice the last round could not act on is not worth a call.
                if analysis is None and ctx.budget.rounds - len(ctx.tree) > 1:
                    analyse(ctx, parent)
                    continue
                advice = analysis.extra["advice"] if analysis else ""
            expand(ctx, action, parent, advice)
        return AgentOutcome(ctx.tree.best(), reason, ctx.tree)
