"""The offline model's writer for platform `cpu`: a hand-written float32 task's operator template,
filled with one point of its family (C++ with OpenMP, built by ForgeBench's fast path)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from string import Template

from harness.llm.offline.family import Family, Point
from harness.llm.offline.operators import default_eps, family_for, misfit, refusal
from harness.llm.offline.prompt import PromptTask

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates" / "cpu"


@dataclass(frozen=True)
class CpuPlan:
    """What a CPU candidate is made of, whichever point of its family is rendered."""

    family: Family
    eps: float  # the default of ModelNew's eps argument


def plan(task: PromptTask) -> CpuPlan | str:
    """The plan of the task's candidate, or a plain-text refusal: one float32 tensor, and an operator
    whose template fits the reference."""
    family = family_for(task)
    one_tensor = len(task.input_shapes) == 1 and len(task.input_shapes[0]) > 0
    if family is None or task.input_dtypes != ["float32"] or not one_tensor:
        return refusal(task) + "."
    return misfit(family, task) or CpuPlan(family, default_eps(task))


def write(family: Family, point: Point, plan: CpuPlan) -> str:
    """The candidate module (without its approach line) for one point of a `cpu` family."""
    text = (TEMPLATES_DIR / f"{family.template}.py.tmpl").read_text()
    values = {
        **family.fixed,
        **family.values(point),
        "eps": repr(plan.eps),
        "common": (TEMPLATES_DIR / "common.cpp").read_text().strip(),
    }
    return Template(text).substitute(values)
