"""The embedded offline model: answers ForgeBench prompts from its own kernel templates, no network.

It is the leaderboard's no-LLM baseline. It reads the task block of a prompt, picks the template
family for the operator, and walks that family's parameter space: every candidate's approach line
names its family and point (`# approach: offline rmsnorm {"accumulators": 16, ...}`), so a later
prompt, which quotes earlier approach lines and their outcomes, tells it which points were tried
and which was fastest. It proposes an untried neighbour of the fastest point first, then the rest
of the space in a fixed order, and says so in plain text when nothing is left.
"""

from __future__ import annotations

import ast
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any

from harness.llm import offline_gpu
from harness.llm.base import Completion
from harness.llm.offline_family import Family, Point
from harness.llm.offline_gpu import GPU_FAMILIES, GpuPlan
from harness.prompts import sibling_number

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates" / "cpu"

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

FAMILIES: dict[str, Family] = {**CPU_FAMILIES, **GPU_FAMILIES}
GPU_PLATFORMS = ("triton", "cuda")
_GPU_DTYPES = ("float32", "float16", "bfloat16")

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


@dataclass(frozen=True)
class PromptTask:
    """The machine-readable task block of a prompt, and the reference source under it."""

    operator: str
    aten_ops: list[str]
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    init_inputs: list[Any]
    platform: str
    reference: str

    @property
    def dtype(self) -> str:
        return ", ".join(self.input_dtypes) or "no inputs"


@dataclass(frozen=True)
class Attempt:
    family: str
    point: Point
    speedup: float | None  # None unless the attempt was correct


def _field(prompt: str, name: str) -> str | None:
    match = re.search(rf"^{name}: (.*)$", prompt, re.MULTILINE)
    return match.group(1).strip() if match else None


def parse_task(prompt: str) -> PromptTask | None:
    """The task block of a prompt, or None when the prompt has none."""
    fields = {
        name: _field(prompt, name)
        for name in ("operator", "aten ops", "input shapes", "input dtypes", "init inputs", "platform")
    }
    if any(value is None for value in fields.values()):
        return None
    reference = re.search(r"Reference \(`Model`\):\n```python\n(.*?)\n```", prompt, re.DOTALL)
    try:
        shapes, init_inputs = json.loads(fields["input shapes"]), ast.literal_eval(fields["init inputs"])
    except (ValueError, SyntaxError):
        return None
    if not isinstance(shapes, list) or not all(isinstance(shape, list) for shape in shapes):
        return None
    return PromptTask(
        operator=fields["operator"],
        aten_ops=[op for op in fields["aten ops"].split(", ") if op != "unknown"],
        input_shapes=shapes,
        input_dtypes=[d for d in fields["input dtypes"].strip("[]").split(", ") if d],
        init_inputs=list(init_inputs),
        platform=fields["platform"],
        reference=reference.group(1) if reference else "",
    )


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


def gpu_plan(task: PromptTask) -> GpuPlan | str:
    """The plan of a `triton` or `cuda` candidate, or a plain-text refusal. A hand-written task must fit
    its operator family's template as on the CPU; a captured one is read as its graph of aten calls."""
    refusal = f"I have no template for {task.operator} on {task.platform} with {task.dtype}"
    family = family_for(task)
    if "torch.ops.aten." not in task.reference:
        one_tensor = len(task.input_shapes) == 1 and len(task.input_shapes[0]) > 0
        if family is None or not one_tensor or task.input_dtypes[0] not in _GPU_DTYPES:
            return refusal + "."
        reason = unfit_reason(family, task)
        if reason:
            return f"{refusal}: my {family.name} template does not fit, as {reason}."
    plan = offline_gpu.choose(task, family, _task_eps(task, family))
    return f"{refusal}: {plan}." if isinstance(plan, str) else plan


def _task_eps(task: PromptTask, family: Family | None) -> float:
    """The eps ModelNew is built with: the task's constructor argument, else the reference's default."""
    position = {"hidden": 1, "groups": 2}.get(family.init if family else "none")
    if position is not None and len(task.init_inputs) > position:
        return float(task.init_inputs[position])
    return _default_eps(task)


def decline_reason(task: PromptTask) -> str | None:
    """A plain-text refusal when no template serves the task, else None."""
    if task.platform in GPU_PLATFORMS:
        plan = gpu_plan(task)
        return plan if isinstance(plan, str) else None
    refusal = f"I have no template for {task.operator} on {task.platform} with {task.dtype}"
    family = family_for(task)
    one_tensor = len(task.input_shapes) == 1 and len(task.input_shapes[0]) > 0
    if family is None or task.platform != "cpu" or task.input_dtypes != ["float32"] or not one_tensor:
        return refusal + "."
    reason = unfit_reason(family, task)
    return f"{refusal}: my {family.name} template does not fit, as {reason}." if reason else None


_APPROACH = r"approach: offline (\w+) (\{[^`\n]*\})"
_PARENT_HEADING = "## The version to improve"  # refine.md's section for the parent
_SPEEDUP = re.compile(r"^correct \(.*?([0-9.]+(?:e[+-]?\d+)?)x vs eager")


def _attempt(family_name: str, params: str, outcome: str) -> Attempt | None:
    family = FAMILIES.get(family_name)
    try:
        values = json.loads(params)
    except json.JSONDecodeError:
        return None
    if family is None or not isinstance(values, dict) or list(values) != list(family.space):
        return None
    point = tuple(values.values())
    if any(v not in choices for v, choices in zip(point, family.space.values())):
        return None
    speedup = _SPEEDUP.match(outcome.strip())
    return Attempt(family_name, point, float(speedup.group(1)) if speedup else None)


def parse_attempts(prompt: str) -> tuple[list[Attempt], Attempt | None]:
    """This model's earlier attempts quoted in a prompt, and the parent being refined (if one of them)."""
    listed = [_attempt(*m.groups()) for m in re.finditer(rf"^- `{_APPROACH}`: (.*)$", prompt, re.MULTILINE)]
    parent = re.search(
        rf"^{_PARENT_HEADING}\nIt was evaluated as: (.*)\n\n```python\n# {_APPROACH}$", prompt, re.MULTILINE
    )
    parent_attempt = _attempt(parent.group(2), parent.group(3), parent.group(1)) if parent else None
    attempts = [a for a in [*listed, parent_attempt] if a is not None]
    return attempts, parent_attempt


def next_point(
    family: Family, attempts: list[Attempt], parent: Attempt | None, refining: bool, skip: int = 0
) -> tuple[Point | None, str]:
    """The point to try next and why: the default first; when refining, an untried neighbour of the
    fastest point seen (else of the parent); otherwise, and once those run out, the space in order.
    `skip` passes over that many of those choices: they are being written by requests in flight."""
    mine = [a for a in attempts if a.family == family.name]
    tried = {a.point for a in mine}
    timed = [a for a in mine if a.speedup is not None]
    best = max(timed, key=lambda a: a.speedup) if timed else None
    anchor = best or (parent if parent and parent.family == family.name else None)
    choices: dict[Point, str] = {}
    if not tried:
        choices[family.default] = "the default point of my template"
    if refining and anchor:
        basis = f"the fastest point so far ({best.speedup:g}x vs eager)" if best else "the version to improve"
        for point in family.neighbours(anchor.point):
            choices.setdefault(point, f"an untried neighbour of {basis}")
    for point in family.points():
        choices.setdefault(point, "the next untried point of my template")
    untried = [(point, why) for point, why in choices.items() if point not in tried]
    if untried:
        point, why = untried[min(skip, len(untried) - 1)]
        return point, why + (f" (request {skip + 1} of those in flight)" if skip else "")
    return None, f"{best.speedup:g}x vs eager" if best else "none was correct"


def _default_eps(task: PromptTask) -> float:
    """The eps default of ModelNew's constructor: the reference's own, else torch's 1e-5."""
    match = re.search(r"eps\s*(?::\s*float)?\s*=\s*([0-9.eE+-]+)", task.reference)
    return float(match.group(1)) if match else 1e-5


def render(family: Family, point: Point, task: PromptTask, plan: GpuPlan | None = None) -> str:
    """The candidate source for one point: the approach line, then the filled template."""
    if family.platform != "cpu":
        plan = plan or gpu_plan(task)
        return f"# approach: {family.describe(point)}\n" + offline_gpu.render(family, point, plan)
    text = (TEMPLATES_DIR / f"{family.template}.py.tmpl").read_text()
    values = {
        **family.fixed,
        **dict(zip(family.space, point)),
        "eps": repr(_default_eps(task)),
        "common": (TEMPLATES_DIR / "common.cpp").read_text().strip(),
    }
    return f"# approach: {family.describe(point)}\n" + Template(text).substitute(values)


_ANALYST_HEADING = "## The version to analyse"


def _section_lines(prompt: str, heading: str) -> list[str]:
    """The non-empty lines under a `## ...` heading, up to the next heading."""
    if heading not in prompt:
        return []
    body = prompt.split(heading, 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in body.splitlines()[1:] if line.strip()]


def advise(prompt: str) -> str:
    """Analyst advice in plain text: the offline model has no profile-driven reasoning, so it says
    what the profile shows and that its next step is a neighbouring point of its template."""
    measurements = _section_lines(prompt, "## Its measurements")
    profile = [line for line in _section_lines(prompt, "## Its profile") if not set(line) <= set("|-: ")]
    top = profile[1] if len(profile) > 1 else (profile[0] if profile else "no profile entries")
    return (
        "Offline analyst (template search, no model of the hardware): "
        f"measurements: {'; '.join(measurements[:3]) or 'none'}. Largest profile entry: {top}. "
        "Recommendation: keep the approach and try the neighbouring points of the template's parameter "
        "space (accumulators, vector width, schedule) that have not been tried yet."
    )


def answer(prompt: str) -> str:
    """The offline model's whole reply to one user prompt."""
    if _ANALYST_HEADING in prompt:
        return advise(prompt)
    task = parse_task(prompt)
    if task is None:
        return (
            "I found no ForgeBench task block (operator, input shapes, input dtypes, init inputs, "
            "platform) in this prompt, so I have no kernel to offer."
        )
    plan = gpu_plan(task) if task.platform in GPU_PLATFORMS else decline_reason(task)
    if isinstance(plan, str):
        return plan
    family = plan.family if plan else family_for(task)
    attempts, parent = parse_attempts(prompt)
    skip = sibling_number(prompt) - 1
    point, why = next_point(family, attempts, parent, refining=_PARENT_HEADING in prompt, skip=skip)
    if point is None:
        return (
            f"Every one of the {len(family.points())} points of my {family.name} template has been tried "
            f"(best: {why}); I have nothing new to propose for {task.operator}."
        )
    return f"This is {why}: `{family.describe(point)}`.\n\n```python\n{render(family, point, task, plan)}```\n"


class OfflineModel:
    """A deterministic chat model that answers from kernel templates; it needs no network."""

    def __init__(self, name: str = "offline", label: str | None = None):
        self.name = name
        self.label = label
        self.api_base = None

    def check_ready(self) -> None:
        """Nothing to check: no key, no server."""

    def trace_to(self, tracking_uri: str, experiment: str) -> None:
        """Nothing to trace: no provider is called (transcripts are in the tree's folder)."""

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        started = time.monotonic()
        prompt = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        text = answer(prompt)
        return Completion(
            text=text,
            model=self.name,
            tokens_in=sum(len(m.get("content", "")) for m in messages) // 4,
            tokens_out=len(text) // 4,
            cost_usd=0.0,
            latency_s=time.monotonic() - started,
        )
