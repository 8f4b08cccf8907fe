"""The hand-written operators the offline model knows (softmax, the norms, activations): which one a
task is, and whether that operator's template fits the task's constructor and parameters.

Each operator is a family of the CPU templates; on `triton` and `cuda` a hand-written task of one is
restated as the aten calls it stands for, so the same fit decides there too.
"""

from __future__ import annotations

import re
from typing import Any

from harness.llm.offline.family import Family
from harness.llm.offline.prompt import PromptTask

# -mprefer-vector-width: zmm registers halve the instructions, ymm keep clocks up on some parts.
_VECTOR_BITS = (512, 256)
_ROW_REDUCTION = {"accumulators": (16, 32, 8), "vector_bits": _VECTOR_BITS}
# Dynamic chunks keep both cores busy when one is preempted (a shared 2-core box); static has no queue.
_SCHEDULE = {"schedule": ("dynamic, 16384", "static")}
# glibc's expf is exact but scalar: the fallback when the polynomial's accuracy is in doubt.
_EXP = {"exp": ("poly", "libm")}

CPU_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("softmax", "softmax", {**_ROW_REDUCTION, "passes": (3, 2), **_EXP}, axis="last"),
        Family(
            "rmsnorm",
            "rmsnorm",
            {"accumulators": (16, 32, 64, 8), "vector_bits": _VECTOR_BITS},
            init="hidden",
            parameters=("weight",),
        ),
        Family(
            "layernorm",
            "layernorm",
            {"stats": ("two_pass", "one_pass"), **_ROW_REDUCTION},
            init="hidden",
            parameters=("weight", "bias"),
        ),
        # A group (here 256 KB) outgrows L1, so a second read of it costs more than for a row.
        Family(
            "groupnorm",
            "groupnorm",
            {"stats": ("one_pass", "two_pass"), **_ROW_REDUCTION},
            init="groups",
            parameters=("weight", "bias"),
        ),
        Family(
            "silu_and_mul",
            "silu_and_mul",  # dynamic chunks of 8 rows, for the reason above
            {"schedule": ("dynamic, 8", "static"), "vector_bits": _VECTOR_BITS, **_EXP},
            axis="halves",
        ),
        Family("relu", "elementwise", {**_SCHEDULE, "vector_bits": _VECTOR_BITS}, fixed={"op": "relu", "exp": "none"}),
        *(
            Family(op, "elementwise", {**_SCHEDULE, "vector_bits": _VECTOR_BITS, **_EXP}, fixed={"op": op})
            for op in ("sigmoid", "tanh", "silu", "gelu_tanh", "gelu_erf")
        ),
    ]
}

# Operator lines (or aten ops joined by '+') to families; "gelu" splits on the reference's approximate.
OPERATORS = {
    "aten._softmax": "softmax",
    "aten.softmax": "softmax",
    "rms_norm": "rmsnorm",
    "aten.rms_norm": "rmsnorm",
    "pow+mean+add+rsqrt+mul": "rmsnorm",
    "aten.native_layer_norm": "layernorm",
    "aten.layer_norm": "layernorm",
    "aten.native_group_norm": "groupnorm",
    "aten.group_norm": "groupnorm",
    "silu_and_mul": "silu_and_mul",
    "silu+mul": "silu_and_mul",
    "aten.gelu": "gelu",
    "aten.relu": "relu",
    "aten.sigmoid": "sigmoid",
    "aten.tanh": "tanh",
    "aten.silu": "silu",
}


def family_for(task: PromptTask) -> Family | None:
    """The template family for the operator line, falling back to the aten ops the reference calls."""
    ops = "+".join(task.aten_ops)
    key = next((OPERATORS[name] for name in (task.operator, "aten." + ops, ops) if name in OPERATORS), None)
    if key == "gelu":
        tanh = re.search(r"""approximate\s*=\s*["']tanh["']""", task.reference)
        key = "gelu_tanh" if tanh else "gelu_erf"
    return CPU_FAMILIES.get(key) if key else None


def _softmax_dim(reference: str) -> int | None:
    match = re.search(r"softmax\([^)]*?(?:dim\s*=\s*)?(-?\d+)\s*\)", reference)
    return int(match.group(1)) if match else None


_INIT_USAGE = {
    "none": "no constructor arguments",
    "hidden": "init inputs [hidden_size, eps]",
    "groups": "init inputs [num_groups, num_channels, eps] for N, C, ... inputs",
}


def _init_fits(family: Family, shape: list[int], init: list[Any]) -> bool:
    """Whether the task's constructor arguments are the ones the template's ModelNew takes."""
    if not all(isinstance(v, (int, float)) for v in init):
        return False
    if family.init == "hidden":
        return 1 <= len(init) <= 2 and init[0] == shape[-1]
    if family.init == "groups":
        return (
            2 <= len(init) <= 3
            and len(shape) >= 3
            and init[1] == shape[1]
            and isinstance(init[0], int)
            and init[0] > 0
            and shape[1] % init[0] == 0
        )
    return not init


def unfit_reason(family: Family, task: PromptTask) -> str | None:
    """Why the family's template cannot serve this task, or None when it can."""
    shape = task.input_shapes[0]
    missing = [p for p in family.parameters if not re.search(rf"self\.{p}\s*=\s*nn\.Parameter", task.reference)]
    if missing:
        return f"its template needs the reference to register nn.Parameter {', '.join(missing)}"
    if not _init_fits(family, shape, task.init_inputs):
        return f"its template takes {_INIT_USAGE[family.init]}, not {task.init_inputs}"
    if family.axis == "last" and _softmax_dim(task.reference) not in (-1, len(shape) - 1):
        return "its template normalises over the last dimension only"
    if family.axis == "halves" and shape[-1] % 2:
        return f"the last dimension ({shape[-1]}) must split into two halves"
    return None


def refusal(task: PromptTask) -> str:
    """The start of every plain-text refusal: what the model has no template for."""
    return f"I have no template for {task.operator} on {task.platform} with {task.dtype}"


def misfit(family: Family, task: PromptTask) -> str | None:
    """The refusal when the family's template does not fit the task, else None."""
    reason = unfit_reason(family, task)
    return f"{refusal(task)}: my {family.name} template does not fit, as {reason}." if reason else None


def default_eps(task: PromptTask) -> float:
    """The eps default of ModelNew's constructor: the reference's own, else torch's 1e-5."""
    match = re.search(r"eps\s*(?::\s*float)?\s*=\s*([0-9.eE+-]+)", task.reference)
    return float(match.group(1)) if match else 1e-5


def task_eps(task: PromptTask, family: Family | None) -> float:
    """The eps ModelNew is built with: the task's constructor argument, else the reference's default."""
    position = {"hidden": 1, "groups": 2}.get(family.init if family else "none")
    if position is not None and len(task.init_inputs) > position:
        return float(task.init_inputs[position])
    return default_eps(task)
