"""The offline model's writer for platform `triton`: its template families, which one serves a graph
(one fused pointwise, row or plane kernel, the GroupNorm template, or the matmul template for a lone
mm, addmm or bmm), and one writer a family for the candidate's source."""

from __future__ import annotations

from collections.abc import Callable
from string import Template
from typing import Any

import torch

from harness.llm.offline.family import Family, Point
from harness.llm.offline.fused import TEMPLATES_DIR, host_lines, model_source, render_fused, source_of
from harness.llm.offline.gpu import GpuPlan
from harness.llm.offline.graph import Graph, Node, Ref, Unsupported
from harness.llm.offline.lower import lower

TRITON_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        # 16 elements a thread: two 16-byte loads of 16-bit data in flight per thread.
        Family(
            "triton_pointwise", "fused", {"block": (4096, 2048, 1024, 8192), "num_warps": (8, 4, 16)}, platform="triton"
        ),
        # A whole row in registers; short rows share a program so each moves at least `tile` elements.
        Family(
            "triton_rows",
            "fused",
            {"elements_per_thread": (16, 8, 32, 4), "tile": (4096, 8192, 2048, 16384)},
            platform="triton",
        ),
        # A [rows, columns] tile of `block` elements over N*C planes of H*W: 16 elements a thread by default,
        # and on an H200 (132 SMs) a ResNet-50 batch norm still launches over 100 programs an SM.
        Family("triton_planes", "fused", {"block": (2048, 4096, 1024), "num_warps": (4, 8)}, platform="triton"),
        Family(
            "triton_groupnorm",
            "groupnorm",
            {"chunk": (16384, 8192, 32768), "block": (2048, 4096, 1024), "num_warps": (8, 4)},
            platform="triton",
        ),
        # One [block_m, block_n] tile of C a program, K in block_k steps through a num_stages-deep pipeline;
        # block_m 16 serves decode's few rows.
        Family(
            "triton_matmul",
            "matmul",
            {
                "block_m": (128, 64, 16),
                "block_n": (128, 64, 256),
                "block_k": (64, 32),
                "num_warps": (8, 4),
                "num_stages": (3, 4),
            },
            platform="triton",
        ),
    ]
}

_MATMULS = ("mm", "bmm", "addmm")


def _matmul_operands(graph: Graph, node: Node) -> list[Ref]:
    """A, B and (addmm) the bias, when one Triton matmul computes the call exactly; else Unsupported."""
    if len(graph.outputs) != 1 or graph.outputs[0].name != node.name:
        raise Unsupported(f"forward returns more than {node.aten}'s result; my matmul template writes that alone")
    scale = {k: v for k, v in (node.kwargs or {}).items() if k in ("beta", "alpha")}
    if any(v != 1 for v in scale.values()) or len(node.args) > 3:
        raise Unsupported(f"{node.aten} scales its terms; my matmul template adds the bias to A @ B as they are")
    operands = [*node.args[1:3], node.args[0]] if node.op == "addmm" else list(node.args[:2])
    if not all(isinstance(r, Ref) for r in operands):
        raise Unsupported(f"{node.aten} takes a number where my matmul template reads tensors")
    a, b = (graph.value(r) for r in operands[:2])
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise Unsupported(f"{node.aten} multiplies {a.dtype} by {b.dtype}; my matmul template takes one float dtype")
    if a.dim() == 3 and a.shape[0] > 65535:
        raise Unsupported(f"{node.aten} has {a.shape[0]} batches; my matmul template runs at most 65535")
    return operands


def choose(plan: GpuPlan) -> GpuPlan:
    """The plan with the template that serves its graph; raises Unsupported when none does."""
    kernel = plan.graph.kernel_nodes()
    if len(kernel) == 1 and kernel[0].op in _MATMULS:
        _matmul_operands(plan.graph, kernel[0])
        plan.family, plan.node = TRITON_FAMILIES["triton_matmul"], kernel[0]
        return plan
    if len(kernel) == 1 and kernel[0].op == "native_group_norm":
        node = kernel[0]
        if plan.graph.outputs[0].index != 0 or len(plan.graph.outputs) != 1:
            raise Unsupported("forward returns GroupNorm's statistics; my template writes its output only")
        plan.family, plan.node = TRITON_FAMILIES["triton_groupnorm"], node
        return plan
    plan.body = lower(plan.graph)
    plan.family = TRITON_FAMILIES[f"triton_{plan.body.kind}"]
    return plan


def _model(plan: GpuPlan, lines: list[str], launch_args: list[str]) -> str:
    return model_source(plan.init, plan.forward_args, lines, launch_args)


def _fused(values: dict[str, Any], plan: GpuPlan) -> str:
    lines = plan.prologue + host_lines(plan.graph, plan.body.inputs)
    launch_args = [source_of(r) for r in plan.body.inputs]
    return render_fused(plan.body, plan.graph, values, _model(plan, lines, launch_args))


def _matmul(values: dict[str, Any], plan: GpuPlan) -> str:
    operands = _matmul_operands(plan.graph, plan.node)
    lines = plan.prologue + host_lines(plan.graph, operands)
    model = _model(plan, lines, [source_of(r) for r in operands])
    out, a = plan.graph.value(plan.graph.outputs[0]), plan.graph.value(operands[0])
    text = (TEMPLATES_DIR / "matmul.py.tmpl").read_text()
    return Template(text).substitute(out_dtype=out.dtype, ieee=a.dtype == torch.float32, model=model, **values)


def _groupnorm(values: dict[str, Any], plan: GpuPlan) -> str:
    args = plan.node.args
    lines = plan.prologue + host_lines(plan.graph, [a for a in args[:3] if a is not None])
    model = _model(plan, lines, [source_of(a) if a is not None else "None" for a in args[:3]])
    text = (TEMPLATES_DIR / "groupnorm.py.tmpl").read_text()
    return Template(text).substitute(groups=args[6], eps=repr(args[7]), model=model, **values)


# One writer a family: the three fused layouts share the fused kernel's template.
WRITERS: dict[str, Callable[[dict[str, Any], GpuPlan], str]] = {
    "triton_pointwise": _fused,
    "triton_rows": _fused,
    "triton_planes": _fused,
    "triton_matmul": _matmul,
    "triton_groupnorm": _groupnorm,
}


def write(family: Family, point: Point, plan: GpuPlan) -> str:
    """The candidate module (without its approach line) for one point of a `triton` family."""
    return WRITERS[family.name](family.values(point), plan)
