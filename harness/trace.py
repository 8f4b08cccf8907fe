"""What a task's reference does, found without running it for real: shapes and ATen ops on meta tensors."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.evaluate.checks import COPIES, OpRecorder, is_allowed
from harness.tasks import Task, load_reference_module


@dataclass(frozen=True)
class Signature:
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    init_inputs: list[Any]
    aten_ops: list[str]  # compute ops in call order, without allocations and views
    # A reference written in torch (not captured as aten calls) and holding no parameters or buffers,
    # restated as the straight line of aten calls it makes at these shapes (a `forward` of x0, x1, ...),
    # for a model that writes kernels from graphs; None where it is captured already or cannot be.
    aten_graph: str | None = None

    @property
    def operator(self) -> str:
        """The single compute op, or the ops joined with '+' for a composite reference."""
        return "aten." + self.aten_ops[0] if len(self.aten_ops) == 1 else "+".join(self.aten_ops)


def _describe_value(value: Any) -> tuple[list[int] | None, str]:
    if isinstance(value, torch.Tensor):
        return list(value.shape), str(value.dtype).removeprefix("torch.")
    return None, type(value).__name__


def signature(task: Task) -> Signature:
    """Build the reference on the meta device (no memory, no compute) and record what it calls."""
    return _signature(task.reference_path)


@functools.cache
def _signature(reference_path: Path) -> Signature:
    module = load_reference_module(reference_path, f"forgebench_trace_{reference_path.parent.name}")
    init_inputs = list(module.get_init_inputs())
    with torch.device("meta"):
        inputs = list(module.get_inputs())
        model = module.Model(*init_inputs)
    described = [_describe_value(v) for v in inputs]
    ops: list[str] = []
    try:
        with torch.no_grad(), OpRecorder() as recorder:
            model(*inputs)
        for op in recorder.ops:
            if not is_allowed(op) and op not in ops:
                ops.append(op)
        if not ops:  # a cast or layout copy is the task itself
            ops = [op.rstrip("_") for op in recorder.ops if op.rstrip("_") in COPIES][:1]
    except (NotImplementedError, RuntimeError):
        ops = []  # an op without a meta kernel: the operator stays unknown, nothing else is lost
    shapes, dtypes = [s for s, _ in described if s is not None], [d for _, d in described]
    return Signature(shapes, dtypes, init_inputs, ops, _aten_graph(reference_path.read_text(), model, inputs))


def _aten_graph(source: str, model: torch.nn.Module, inputs: list[Any]) -> str | None:
    """The reference's forward as aten calls (make_fx on the meta tensors), or None where that says
    nothing new (a captured reference) or is not the whole computation (state, non-tensor inputs)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    if "torch.ops.aten." in source or any(True for _ in model.parameters()) or any(True for _ in model.buffers()):
        return None
    if not inputs or not all(isinstance(v, torch.Tensor) for v in inputs):
        return None
    try:
        with torch.no_grad():
            graph = make_fx(model)(*inputs).graph
    except Exception:  # a trace that fails only leaves the prompt without this section
        return None
    return _forward_source(graph)


def _forward_source(graph: torch.fx.Graph) -> str | None:
    """`forward(self, x0, ...)` of one `name = torch.ops.aten.<op>.<overload>(...)` line a call."""
    import operator

    from harness.capture.emit import literal

    names: dict[torch.fx.Node, str] = {}

    def text(value: Any) -> str:
        if isinstance(value, torch.fx.Node):
            return names[value]
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(text(v) for v in value) + "]"
        return literal(value, [])

    lines: list[str] = []
    for node in graph.nodes:
        if node.op == "placeholder":
            names[node] = f"x{len(names)}"
        elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            names[node] = f"t{len(lines)}"
            op = node.target
            args = [text(a) for a in node.args] + [f"{k}={text(v)}" for k, v in node.kwargs.items()]
            call = f"torch.ops.{op.namespace}.{op.overloadpacket.__name__}.{op._overloadname}({', '.join(args)})"
            lines.append(f"{names[node]} = {call}")
        elif node.op == "call_function" and node.target is operator.getitem:
            if not node.users:
                continue  # a result of a call that nothing reads (max.dim's indices where only values are)
            names[node] = f"t{len(lines)}"
            lines.append(f"{names[node]} = {text(node.args[0])}[{node.args[1]}]")
        elif node.op == "output":
            returned = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            if not returned or not all(isinstance(v, torch.fx.Node) for v in returned):
                return None
            lines.append("return " + ", ".join(text(v) for v in returned))
        else:
            return None
    params = ", ".join(v for n, v in names.items() if n.op == "placeholder")
    body = "".join(f"        {line}\n" for line in lines)
    return f"class Model(nn.Module):\n    def forward(self, {params}):\n{body}"
