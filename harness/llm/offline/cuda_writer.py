"""The offline model's writer for platform `cuda`: three NVRTC templates (a last-dimension softmax,
RMSNorm, a single activation), which one serves a graph, and one writer a family for the candidate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from string import Template
from typing import Any

import torch

from harness.llm.offline.family import Family, Point
from harness.llm.offline.gpu import GpuPlan
from harness.llm.offline.graph import Ref, Unsupported

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates" / "cuda"

CUDA_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("cuda_softmax", "softmax", {"threads": (512, 256, 1024)}, platform="cuda"),
        Family("cuda_rmsnorm", "rmsnorm", {"threads": (512, 256, 1024)}, platform="cuda"),
        Family("cuda_pointwise", "pointwise", {"threads": (256, 512, 128), "items": (4, 8, 2)}, platform="cuda"),
    ]
}

CUDA_ACTIVATIONS = {
    "relu": "fmaxf(v, 0.f)",
    "sigmoid": "1.f / (1.f + expf(-v))",
    "tanh": "tanhf(v)",
    "silu": "v / (1.f + expf(-v))",
    "gelu_tanh": "0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))",
    "gelu_erf": "0.5f * v * (1.f + erff(v * 0.7071067811865476f))",
}
_CTYPES = {torch.float32: "float", torch.float16: "__half", torch.bfloat16: "__nv_bfloat16"}
# Hand-written operators with a CUDA template of their own: the RMSNorm template reads the weight
# beside x, which only the operator's restatement names (a captured graph's calls are matched instead).
_OPERATOR_TEMPLATES = {"rmsnorm": "cuda_rmsnorm"}


def choose(plan: GpuPlan) -> GpuPlan:
    """The plan with the template that serves its graph; raises Unsupported when none does."""
    kernel = plan.graph.kernel_nodes()
    node = kernel[-1]
    first = node.args[0] if node.args else None
    if node.op == "gelu":
        key = "gelu_tanh" if dict(node.kwargs or {}).get("approximate", "none") == "tanh" else "gelu_erf"
    else:
        key = node.op
    direct = len(kernel) == 1 and getattr(first, "name", None) == plan.graph.inputs[0]
    dedicated = _OPERATOR_TEMPLATES.get(plan.operator.name) if plan.operator else None
    if dedicated:
        plan.family = CUDA_FAMILIES[dedicated]
    elif direct and node.op == "_softmax" and node.args[1] in (-1, len(plan.graph.value(first).shape) - 1):
        plan.family = CUDA_FAMILIES["cuda_softmax"]
    elif direct and key in CUDA_ACTIVATIONS and len(plan.graph.inputs) == 1:
        plan.family, plan.activation = CUDA_FAMILIES["cuda_pointwise"], key
    else:
        raise Unsupported(
            f"my CUDA templates write a last-dimension softmax, RMSNorm and single activations, not {node.aten} "
            "here (platform triton fuses chains of pointwise ops and row reductions)"
        )
    plan.node = node
    return plan


def _vector_width(x: torch.Tensor, count: int) -> int:
    """Elements a 16-byte load moves, when every row (or the whole tensor) splits into such loads."""
    per_load = 16 // x.element_size()
    return per_load if count % per_load == 0 else 1


def _fill(
    family: Family, values: dict[str, Any], plan: GpuPlan, weight: torch.Tensor, vec: int, launch: list[str]
) -> str:
    """The template of `family` around the common header and a ModelNew whose forward runs `launch`."""
    graph = plan.graph
    x, out = graph.value(Ref(graph.inputs[0])), graph.value(graph.outputs[0])
    common = Template((TEMPLATES_DIR / "common.cuh").read_text()).substitute(
        ctype=_CTYPES[x.dtype], wtype=_CTYPES[weight.dtype], otype=_CTYPES[out.dtype], vec=vec
    )
    lines = [
        *plan.prologue,
        f"x = {graph.inputs[0]}.contiguous()",
        f"y = torch.empty(x.shape, dtype={out.dtype}, device=x.device)",
        *launch,
    ]
    body = "\n".join(f"        {line}" for line in [*lines, "return y"])
    model = (
        f"class ModelNew(nn.Module):\n{plan.init}\n\n    def forward(self, {', '.join(plan.forward_args)}):\n{body}\n"
    )
    text = (TEMPLATES_DIR / f"{family.template}.py.tmpl").read_text()
    return Template(text).substitute(
        common=common, model=model, expression=CUDA_ACTIVATIONS.get(plan.activation, ""), **values
    )


def _row_launch(args: str) -> list[str]:
    """One block a row of the last dimension."""
    return ["cols = x.shape[-1]", f"kernel(grid=(x.numel() // cols, 1, 1), block=(THREADS, 1, 1), args=[x{args}])"]


def _softmax(family: Family, values: dict[str, Any], plan: GpuPlan) -> str:
    x = plan.graph.value(Ref(plan.graph.inputs[0]))
    return _fill(family, values, plan, x, _vector_width(x, x.shape[-1]), _row_launch(", y, cols"))


def _rmsnorm(family: Family, values: dict[str, Any], plan: GpuPlan) -> str:
    x, weight = (plan.graph.value(Ref(name)) for name in plan.graph.inputs[:2])
    launch = _row_launch(", x1, y, cols, self.eps")
    return _fill(family, values, plan, weight, _vector_width(x, x.shape[-1]), launch)


def _pointwise(family: Family, values: dict[str, Any], plan: GpuPlan) -> str:
    x = plan.graph.value(Ref(plan.graph.inputs[0]))
    vec = _vector_width(x, x.numel())
    launch = [
        f"packs = x.numel() // {vec}",
        "blocks = (packs + THREADS * ITEMS - 1) // (THREADS * ITEMS)",
        "kernel(grid=(blocks, 1, 1), block=(THREADS, 1, 1), args=[x, y, packs])",
    ]
    return _fill(family, values, plan, x, vec, launch)


WRITERS: dict[str, Callable[[Family, dict[str, Any], GpuPlan], str]] = {
    "cuda_softmax": _softmax,
    "cuda_rmsnorm": _rmsnorm,
    "cuda_pointwise": _pointwise,
}


def write(family: Family, point: Point, plan: GpuPlan) -> str:
    """The candidate module (without its approach line) for one point of a `cuda` family."""
    return WRITERS[family.name](family, family.values(point), plan)
