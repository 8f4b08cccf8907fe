"""The offline model's writer for platform `cpu`: a hand-written float32 task's operator template, or
for a captured graph of aten calls one row kernel or one matmul kernel with its epilogue (lowered by
`cpu_lower`, writing every tensor the graph returns), filled with one point of its family (C++ with
OpenMP, built by ForgeBench's fast path)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from string import Template

from harness.llm.offline.cpu_lower import CppKernel, lower_cpu
from harness.llm.offline.family import Family, Point
from harness.llm.offline.fused import host_lines, model_source, source_of
from harness.llm.offline.gpu import CAPTURED_INIT, aten_source
from harness.llm.offline.graph import Graph, Unsupported, infer, parse_forward
from harness.llm.offline.operators import default_eps, family_for, misfit, refusal
from harness.llm.offline.prompt import PromptTask

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates" / "cpu"
_VECTOR_BITS = (512, 256)  # as for the operator templates (operators.py)
_EXP = {"exp": ("poly", "libm")}

GRAPH_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        # A row a task: static splits rows evenly; dynamic chunks keep both cores busy when one is preempted.
        Family("cpu_rows", "rows", {"schedule": ("static", "dynamic, 4"), "vector_bits": _VECTOR_BITS, **_EXP}),
        # An MR x NB tile of C in registers: 4 x 64 floats are 16 zmm accumulators.
        Family(
            "cpu_matmul",
            "matmul",
            {"block_n": (64, 32, 128), "rows_per_tile": (4, 8, 2), "vector_bits": _VECTOR_BITS, **_EXP},
        ),
    ]
}


@dataclass(frozen=True)
class CpuPlan:
    """What a CPU candidate is made of, whichever point of its family is rendered."""

    family: Family
    eps: float = 1e-5  # the default of an operator template's ModelNew eps argument
    graph: Graph | None = None  # a captured reference's graph, and the kernel lowered from it
    kernel: CppKernel | None = None
    init: str = CAPTURED_INIT  # ModelNew's constructor around a graph's kernel


def plan(task: PromptTask) -> CpuPlan | str:
    """The plan of the task's candidate, or a plain-text refusal: an operator template that fits one
    float32 tensor, else the row or matmul kernel of the task's aten calls (gpu.aten_source)."""
    family = family_for(task)
    one_tensor = len(task.input_shapes) == 1 and len(task.input_shapes[0]) > 0
    captured = "torch.ops.aten." in task.reference
    refused = refusal(task) + "."
    if family is not None and task.input_dtypes == ["float32"] and one_tensor:
        refused = misfit(family, task) or ""
        if not refused:
            return CpuPlan(family, default_eps(task))
    if not captured and not task.aten_graph:
        return refused
    try:
        source, init = aten_source(task)
        graph = infer(parse_forward(source), task.input_shapes, task.input_dtypes)
        kernel = lower_cpu(graph)
    except Unsupported as exc:
        return f"{refusal(task)}: {exc}."
    return CpuPlan(GRAPH_FAMILIES[f"cpu_{kernel.kind}"], graph=graph, kernel=kernel, init=init)


def _indent(lines: list[str], spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in lines)


def _body(kernel: CppKernel, matmul: bool) -> list[str]:
    """The C++ of one row: the inputs' row pointers, the row's statements, and the loop storing it."""
    lines = [f"const float* __restrict x{k} = x[{k}];" for k in range(len(kernel.inputs))] + kernel.lines
    stored = [(k, var) for k, var in enumerate(kernel.results) if var]
    if not stored:
        return lines
    head = ["const long c = n0 + j;", "const float mm = acc[i][j];"] if matmul else []
    loop = "for (long j = 0; j < nb; ++j) {" if matmul else "for (long c = 0; c < COLS; ++c) {"
    store = [*head, *kernel.store, *(f"y{k}[c] = {var};" for k, var in stored)]
    return [
        *lines,
        *(f"float* __restrict y{k} = out[{k}] + r * COLS;" for k, _ in stored),
        "#pragma omp simd",
        loop,
        *(f"    {s}" for s in store),
        "}",
    ]


def _graph_module(values: dict, plan: CpuPlan) -> str:
    kernel, graph = plan.kernel, plan.graph
    matmul = kernel.kind == "matmul"
    operands = [*kernel.operands, *kernel.inputs]
    model = model_source(plan.init, graph.inputs, host_lines(graph, operands), [source_of(r) for r in operands])
    lead = kernel.shape[:-1]
    rows = Template((TEMPLATES_DIR / "rows.cpp").read_text()).substitute(
        cols=kernel.shape[-1], lead=len(lead), inputs=len(kernel.inputs), sizes=", ".join(map(str, lead)) or "1"
    )
    launch = Template((TEMPLATES_DIR / "rows_launch.py.tmpl").read_text()).substitute(
        shape=kernel.shape, out_shapes=kernel.out_shapes, spans=kernel.spans
    )
    fields = {
        "common": (TEMPLATES_DIR / "common.cpp").read_text().strip(),
        "rows": rows.strip(),
        "launch": launch.strip(),
    }
    if matmul:
        a, b = (graph.value(r) for r in kernel.operands)
        fields.update(m=math.prod(kernel.shape[:-1]), n=b.shape[1], k=a.shape[1])
    text = (TEMPLATES_DIR / f"{plan.family.template}.py.tmpl").read_text()
    body = _indent(_body(kernel, matmul), 16 if matmul else 8)
    return Template(text).substitute(values, body=body, model=model, **fields)


def write(family: Family, point: Point, plan: CpuPlan) -> str:
    """The candidate module (without its approach line) for one point of a `cpu` family."""
    if plan.kernel is not None:
        return _graph_module(family.values(point), plan)
    text = (TEMPLATES_DIR / f"{family.template}.py.tmpl").read_text()
    values = {
        **family.fixed,
        **family.values(point),
        "eps": repr(plan.eps),
        "common": (TEMPLATES_DIR / "common.cpp").read_text().strip(),
    }
    return Template(text).substitute(values)
