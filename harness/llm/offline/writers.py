"""The offline model's writers, one per platform by name: the plan of a task's candidate (which
template serves it) or a plain-text refusal, and the candidate's source at one point of its family."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.llm.offline import cpu_writer, cuda_writer, triton_writer
from harness.llm.offline.cpu_writer import GRAPH_FAMILIES, CpuPlan
from harness.llm.offline.cuda_writer import CUDA_FAMILIES
from harness.llm.offline.family import Family, Point
from harness.llm.offline.gpu import GpuPlan, graph_plan
from harness.llm.offline.graph import Unsupported
from harness.llm.offline.operators import CPU_FAMILIES, family_for, misfit, refusal, task_eps
from harness.llm.offline.prompt import PromptTask
from harness.llm.offline.triton_writer import TRITON_FAMILIES

FAMILIES: dict[str, Family] = {**CPU_FAMILIES, **GRAPH_FAMILIES, **TRITON_FAMILIES, **CUDA_FAMILIES}
_GPU_DTYPES = ("float32", "float16", "bfloat16")
_GPU_CHOICES: dict[str, Callable[[GpuPlan], GpuPlan]] = {"triton": triton_writer.choose, "cuda": cuda_writer.choose}


def gpu_plan(task: PromptTask) -> GpuPlan | str:
    """The plan of a `triton` or `cuda` candidate, or a plain-text refusal. A hand-written task fits its
    operator family's template as on the CPU, else is read as the aten calls the prompt restates it
    as; a captured one is read as its own graph of aten calls."""
    family = family_for(task)
    if "torch.ops.aten." not in task.reference:
        one_tensor = len(task.input_shapes) == 1 and len(task.input_shapes[0]) > 0
        fits = family is not None and one_tensor and task.input_dtypes[0] in _GPU_DTYPES
        refused = misfit(family, task) if fits else refusal(task) + "."
        if refused and not task.aten_graph:
            return refused
        if refused:
            family = None  # no operator template fits: the prompt's aten calls are the task
    try:
        return _GPU_CHOICES[task.platform](graph_plan(task, family, task_eps(task, family)))
    except Unsupported as exc:
        return f"{refusal(task)}: {exc}."


PLANS: dict[str, Callable[[PromptTask], CpuPlan | GpuPlan | str]] = {
    "cpu": cpu_writer.plan,
    "triton": gpu_plan,
    "cuda": gpu_plan,
}
WRITERS: dict[str, Callable[[Family, Point, Any], str]] = {
    "cpu": cpu_writer.write,
    "triton": triton_writer.write,
    "cuda": cuda_writer.write,
}


def plan_for(task: PromptTask) -> CpuPlan | GpuPlan | str:
    """The plan of the task's candidate on its platform, or a plain-text refusal."""
    planner = PLANS.get(task.platform)
    return planner(task) if planner else refusal(task) + "."


def render(family: Family, point: Point, task: PromptTask, plan: CpuPlan | GpuPlan | None = None) -> str:
    """The candidate source for one point: the approach line, then the platform writer's module."""
    plan = plan or plan_for(task)
    if isinstance(plan, str):
        raise ValueError(f"no candidate of {family.name} for this task: {plan}")
    return f"# approach: {family.describe(point)}\n" + WRITERS[family.platform](family, point, plan)
