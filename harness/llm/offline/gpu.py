"""What a `triton` or `cuda` candidate is made of: the task's reference as a graph of aten calls.

A captured reference is read as it is; a hand-written one (softmax, RMSNorm, ...) is first restated
as the aten calls its operator family stands for, with the constructor and parameters its ModelNew
must keep. Which template then serves the graph is each platform writer's choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from string import Template

from harness.llm.offline.family import Family
from harness.llm.offline.graph import Graph, Node, Unsupported, infer, parse_forward
from harness.llm.offline.lower import Body
from harness.llm.offline.prompt import PromptTask

CAPTURED_INIT = "    def __init__(self):\n        super().__init__()"
# A traced reference holds no state (harness/trace.py traces no other) and its constructor arguments
# are constants of its graph, so ModelNew takes them as the reference does and keeps none.
TRACED_INIT = "    def __init__(self, *init_inputs):\n        super().__init__()"


@dataclass
class GpuPlan:
    """What a GPU candidate is made of, whichever point of its family is rendered."""

    graph: Graph
    family: Family | None = None  # the template serving the graph: the platform writer's choice
    body: Body | None = None
    node: Node | None = None  # the one call a dedicated template computes
    activation: str = ""  # cuda_pointwise's activation
    init: str = CAPTURED_INIT
    forward_args: list[str] = field(default_factory=lambda: ["x"])
    prologue: list[str] = field(default_factory=list)
    operator: Family | None = None  # the operator family a hand-written task was restated from


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
    "none": (CAPTURED_INIT, []),
    "hidden": ("    def __init__(self, hidden_size, eps=$eps):", ["hidden_size"]),
    "groups": ("    def __init__(self, num_groups, num_channels, eps=$eps):", ["num_channels"]),
}


def parameter_dtype(reference: str, name: str) -> str:
    """The dtype the reference gives nn.Parameter `name` (float32 unless its line says otherwise)."""
    line = re.search(rf"self\.{name}\s*=\s*nn\.Parameter\((.*)", reference)
    text = line.group(1) if line else ""
    return "bfloat16" if "bfloat16" in text else "float16" if ("half()" in text or "float16" in text) else "float32"


def _restated(task: PromptTask, family: Family, eps: float) -> tuple[Graph, str, list[str]]:
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


def aten_source(task: PromptTask) -> tuple[str, str]:
    """The task as a forward of aten calls and ModelNew's constructor: a captured reference as it is
    written, else the prompt's restatement of a torch reference; raises Unsupported for neither."""
    if "torch.ops.aten." in task.reference:
        if task.init_inputs:
            raise Unsupported(f"a graph of aten calls takes no constructor arguments, not {task.init_inputs}")
        return task.reference, CAPTURED_INIT
    if task.aten_graph:
        return task.aten_graph, TRACED_INIT
    raise Unsupported("the reference is neither a graph of aten calls nor an operator I know")


def graph_plan(task: PromptTask, operator_family: Family | None, eps: float) -> GpuPlan:
    """The task's graph in a plan whose template the platform's writer then chooses: a hand-written
    operator restated, else the task's aten calls (aten_source); raises Unsupported for neither."""
    if operator_family is None or "torch.ops.aten." in task.reference:
        source, init = aten_source(task)
        graph = infer(parse_forward(source), task.input_shapes, task.input_dtypes)
        return GpuPlan(graph, init=init, forward_args=graph.inputs)
    graph, init, prologue = _restated(task, operator_family, eps)
    return GpuPlan(graph, init=init, prologue=prologue, operator=operator_family)
