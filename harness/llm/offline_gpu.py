"""The offline model on platforms `triton` and `cuda`: which template serves a task, and its candidate.

A captured reference is read as a graph of aten calls; a hand-written one (softmax, RMSNorm, ...)
is first restated as the aten calls its operator family stands for. Triton candidates are generated
from the graph (one fused pointwise, row or plane kernel, the GroupNorm template, or the matmul template for a
lone mm, addmm or bmm); CUDA candidates fill
one of three NVRTC templates (softmax, RMSNorm, a single activation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import torch

from harness.llm.offline_family import Family, Point
from harness.llm.offline_graph import Graph, Node, Ref, Unsupported, infer, parse_forward
from harness.llm.offline_lower import Body, lower
from harness.llm.offline_triton import host_lines, model_source, render_fused, source_of

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"

GPU_FAMILIES: dict[str, Family] = {
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
_CAPTURED_INIT = "    def __init__(self):\n        super().__init__()"


@dataclass
class GpuPlan:
    """What a GPU candidate is made of, whichever point of its family is rendered."""

    family: Family
    graph: Graph
    body: Body | None = None
    node: Node | None = None  # the one call a dedicated template computes
    activation: str = ""  # cuda_pointwise's activation
    init: str = _CAPTURED_INIT
    forward_args: list[str] = field(default_factory=lambda: ["x"])
    prologue: list[str] = field(default_factory=list)
    handwritten: bool = False


# -- hand-written tasks, restated as the aten calls their family stands for -----------------------
_HANDWRITTEN = {
    "softmax": ["return torch.ops.aten._softmax.default(x0, -1, False)"],
    "rmsnorm": [
        "t0 = torch.ops.aten._to_copy.default(x0, dtype=torch.float32)",
        "t1 = torch.ops.aten.pow.Tensor_Scalar(t0, 2)",
        "t2 = torch.ops.aten.mean.dim(t1, [-1], True)",
        "t3 = torch.ops.aten.add.Tensor(t2, $eps)",
        "t4 = torch.ops.aten.rsqrt.default(t3)",
        "t5 = torch.ops.aten.mul.Tensor(t0, t4)",
        "t6 = torch.ops.aten._to_copy.default(t5, dtype=torch.$dtype)",
        "return torch.ops.aten.mul.Tensor(x1, t6)",
    ],
    "layernorm": ["out = torch.ops.aten.native_layer_norm.default(x0, [$last], x1, x2, $eps)", "return out[0]"],
    "groupnorm": [
        "out = torch.ops.aten.native_group_norm.default(x0, x1, x2, $batch, $channels, $hw, $groups, $eps)",
        "return out[0]",
    ],
    "silu_and_mul": [
        "t0 = torch.ops.aten.slice.Tensor(x0, -1, 0, $half)",
        "t1 = torch.ops.aten.slice.Tensor(x0, -1, $half, $last)",
        "t2 = torch.ops.aten.silu.default(t0)",
        "return torch.ops.aten.mul.Tensor(t2, t1)",
    ],
    **{op: [f"return torch.ops.aten.{op}.default(x0)"] for op in ("relu", "sigmoid", "tanh", "silu")},
    "gelu_tanh": ["return torch.ops.aten.gelu.default(x0, approximate='tanh')"],
    "gelu_erf": ["return torch.ops.aten.gelu.default(x0)"],
}
_INITS = {
    "none": (_CAPTURED_INIT, []),
    "hidden": ("    def __init__(self, hidden_size, eps=$eps):", ["hidden_size"]),
    "groups": ("    def __init__(self, num_groups, num_channels, eps=$eps):", ["num_channels"]),
}


def parameter_dtype(reference: str, name: str) -> str:
    """The dtype the reference gives nn.Parameter `name` (float32 unless its line says otherwise)."""
    line = re.search(rf"self\.{name}\s*=\s*nn\.Parameter\((.*)", reference)
    text = line.group(1) if line else ""
    return "bfloat16" if "bfloat16" in text else "float16" if ("half()" in text or "float16" in text) else "float32"


def _handwritten(task, family: Family, eps: float) -> tuple[Graph, str, list[str]]:
    """The aten graph of a hand-written task, ModelNew's constructor and its forward's first line."""
    shape, dtype = task.input_shapes[0], task.input_dtypes[0]
    hw = 1
    for n in shape[2:]:
        hw *= n
    fields = {
        "eps": repr(eps),
        "dtype": dtype,
        "last": shape[-1],
        "half": shape[-1] // 2,
        "batch": shape[0],
        "channels": shape[1] if len(shape) > 1 else 1,
        "hw": hw,
        "groups": task.init_inputs[0] if task.init_inputs else 1,
    }
    lines = [Template(line).substitute(fields) for line in _HANDWRITTEN[family.name]]
    names = ["x0", *[f"x{i + 1}" for i in range(len(family.parameters))]]
    source = f"class Model:\n    def forward(self, {', '.join(names)}):\n" + "".join(f"        {x}\n" for x in lines)
    graph = parse_forward(source)
    header, size = _INITS[family.init]
    init = [Template(header).substitute(eps=repr(eps)), "        super().__init__()"]
    shapes, dtypes = [shape], [dtype]
    for p in family.parameters:
        p_dtype = parameter_dtype(task.reference, p)
        fill = "ones" if p == "weight" else "zeros"
        init.append(f"        self.{p} = nn.Parameter(torch.{fill}({size[0]}, dtype=torch.{p_dtype}))")
        shapes.append([shape[-1] if family.init == "hidden" else fields["channels"]])
        dtypes.append(p_dtype)
    if family.init != "none":
        init.append("        self.eps = eps")
    infer(graph, shapes, dtypes)
    bind = ", ".join(["x", *[f"self.{p}" for p in family.parameters]])
    return graph, "\n".join(init), [f"{', '.join(names)} = {bind}"]


def choose(task, operator_family: Family | None, eps: float) -> GpuPlan | str:
    """The plan for a task on `triton` or `cuda`, or a sentence saying why no template serves it."""
    try:
        if "torch.ops.aten." in task.reference:
            if task.init_inputs:
                raise Unsupported(f"a graph of aten calls takes no constructor arguments, not {task.init_inputs}")
            graph = infer(parse_forward(task.reference), task.input_shapes, task.input_dtypes)
            plan = GpuPlan(GPU_FAMILIES["triton_rows"], graph, forward_args=graph.inputs)
        elif operator_family is not None:
            graph, init, prologue = _handwritten(task, operator_family, eps)
            plan = GpuPlan(GPU_FAMILIES["triton_rows"], graph, init=init, prologue=prologue, handwritten=True)
        else:
            raise Unsupported("the reference is neither a graph of aten calls nor an operator I know")
        return _cuda_plan(plan, operator_family) if task.platform == "cuda" else _triton_plan(plan)
    except Unsupported as exc:
        return str(exc)


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


def _triton_plan(plan: GpuPlan) -> GpuPlan:
    kernel = plan.graph.kernel_nodes()
    if len(kernel) == 1 and kernel[0].op in _MATMULS:
        _matmul_operands(plan.graph, kernel[0])
        plan.family, plan.node = GPU_FAMILIES["triton_matmul"], kernel[0]
        return plan
    if len(kernel) == 1 and kernel[0].op == "native_group_norm":
        node = kernel[0]
        if plan.graph.outputs[0].index != 0 or len(plan.graph.outputs) != 1:
            raise Unsupported("forward returns GroupNorm's statistics; my template writes its output only")
        plan.family, plan.node = GPU_FAMILIES["triton_groupnorm"], node
        return plan
    plan.body = lower(plan.graph)
    plan.family = GPU_FAMILIES[f"triton_{plan.body.kind}"]
    return plan


def _cuda_plan(plan: GpuPlan, operator_family: Family | None) -> GpuPlan:
    kernel = plan.graph.kernel_nodes()
    node = kernel[-1]
    first = node.args[0] if node.args else None
    name = operator_family.name if plan.handwritten and operator_family else None
    if node.op == "gelu":
        key = "gelu_tanh" if dict(node.kwargs or {}).get("approximate", "none") == "tanh" else "gelu_erf"
    else:
        key = node.op
    direct = len(kernel) == 1 and getattr(first, "name", None) == plan.graph.inputs[0]
    if name == "rmsnorm":
        plan.family = GPU_FAMILIES["cuda_rmsnorm"]
    elif direct and node.op == "_softmax" and node.args[1] in (-1, len(plan.graph.value(first).shape) - 1):
        plan.family = GPU_FAMILIES["cuda_softmax"]
    elif direct and key in CUDA_ACTIVATIONS and len(plan.graph.inputs) == 1:
        plan.family, plan.activation = GPU_FAMILIES["cuda_pointwise"], key
    else:
        raise Unsupported(
            f"my CUDA templates write a last-dimension softmax, RMSNorm and single activations, not {node.aten} "
            "here (platform triton fuses chains of pointwise ops and row reductions)"
        )
    plan.node = node
    return plan


def render(family: Family, point: Point, plan: GpuPlan) -> str:
    """The candidate module (without its approach line) for one point of the plan's family."""
    values = family.values(point)
    if family.template == "fused":
        lines = plan.prologue + host_lines(plan.graph, plan.body.inputs)
        launch_args = [source_of(r) for r in plan.body.inputs]
        return render_fused(plan.body, plan.graph, values, _model(plan, lines, launch_args))
    if family.name == "triton_matmul":
        operands = _matmul_operands(plan.graph, plan.node)
        lines = plan.prologue + host_lines(plan.graph, operands)
        model = _model(plan, lines, [source_of(r) for r in operands])
        out, a = plan.graph.value(plan.graph.outputs[0]), plan.graph.value(operands[0])
        text = (TEMPLATES_DIR / "triton" / "matmul.py.tmpl").read_text()
        return Template(text).substitute(out_dtype=out.dtype, ieee=a.dtype == torch.float32, model=model, **values)
    if family.name == "triton_groupnorm":
        args = plan.node.args
        lines = plan.prologue + host_lines(plan.graph, [a for a in args[:3] if a is not None])
        model = _model(plan, lines, [source_of(a) if a is not None else "None" for a in args[:3]])
        text = (TEMPLATES_DIR / "triton" / "groupnorm.py.tmpl").read_text()
        return Template(text).substitute(groups=args[6], eps=repr(args[7]), model=model, **values)
    return _render_cuda(family, values, plan)


def _model(plan: GpuPlan, lines: list[str], launch_args: list[str]) -> str:
    return model_source(plan.init, plan.forward_args, lines, launch_args)


def _render_cuda(family: Family, values: dict[str, Any], plan: GpuPlan) -> str:
    graph = plan.graph
    x = graph.value(Ref(graph.inputs[0]))
    out = graph.value(graph.outputs[0])
    weight = graph.value(Ref(graph.inputs[1])) if family.name == "cuda_rmsnorm" else x
    bytes_per_item = x.element_size()
    count = x.shape[-1] if family.name != "cuda_pointwise" else x.numel()
    vec = 16 // bytes_per_item if count % (16 // bytes_per_item) == 0 else 1
    common = Template((TEMPLATES_DIR / "cuda" / "common.cuh").read_text()).substitute(
        ctype=_CTYPES[x.dtype], wtype=_CTYPES[weight.dtype], otype=_CTYPES[out.dtype], vec=vec
    )
    lines = [
        *plan.prologue,
        f"x = {graph.inputs[0]}.contiguous()",
        f"y = torch.empty(x.shape, dtype={out.dtype}, device=x.device)",
    ]
    if family.name == "cuda_pointwise":
        lines += [
            f"packs = x.numel() // {vec}",
            "blocks = (packs + THREADS * ITEMS - 1) // (THREADS * ITEMS)",
            "kernel(grid=(blocks, 1, 1), block=(THREADS, 1, 1), args=[x, y, packs])",
        ]
    else:
        extra = ", x1, y, cols, self.eps" if family.name == "cuda_rmsnorm" else ", y, cols"
        lines += [
            "cols = x.shape[-1]",
            f"kernel(grid=(x.numel() // cols, 1, 1), block=(THREADS, 1, 1), args=[x{extra}])",
        ]
    body = "\n".join(f"        {line}" for line in [*lines, "return y"])
    model = (
        f"class ModelNew(nn.Module):\n{plan.init}\n\n    def forward(self, {', '.join(plan.forward_args)}):\n{body}\n"
    )
    text = (TEMPLATES_DIR / "cuda" / f"{family.template}.py.tmpl").read_text()
    return Template(text).substitute(
        common=common, model=model, expression=CUDA_ACTIVATIONS.get(plan.activation, ""), **values
    )
