"""A reference's forward as a small graph of aten calls, with every value's shape and dtype.

Captured references are straight-line `torch.ops.aten.<op>.<overload>(...)` calls on forward's
arguments. This module reads that source with `ast` (nothing of it is executed), runs each call on
meta tensors to learn the shapes and dtypes, and marks which values are views of the inputs (the
candidate's forward may take those itself) and which must be computed by a kernel.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import torch

# Ops that only re-view their first argument; on an input the candidate's forward runs them as written.
VIEW_OPS = frozenset(
    [
        "view",
        "_unsafe_view",
        "reshape",
        "as_strided",
        "t",
        "transpose",
        "permute",
        "squeeze",
        "unsqueeze",
        "expand",
        "slice",
        "select",
        "alias",
        "detach",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "narrow",
        "unflatten",
        "flatten",
    ]
)

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "bool": torch.bool}


class Unsupported(Exception):
    """The reference holds something the offline model's generator does not write kernels for."""


@dataclass(frozen=True)
class Ref:
    """A value of the graph, optionally one output of a multi-output call (`t3[0]`)."""

    name: str
    index: int | None = None


@dataclass
class Node:
    name: str
    op: str  # aten packet name (`mul`), or "input"
    overload: str = ""
    args: tuple = ()
    kwargs: dict | None = None
    meta: Any = None  # a meta tensor, or a tuple of them for a multi-output call
    host: bool = False  # a view of the inputs, taken in the candidate's forward

    @property
    def aten(self) -> str:
        return f"aten.{self.op}.{self.overload}"


@dataclass
class Graph:
    inputs: list[str]
    nodes: dict[str, Node]
    outputs: list[Ref]

    def value(self, ref: Ref):
        meta = self.nodes[ref.name].meta
        return meta[ref.index] if ref.index is not None else meta

    def kernel_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.op != "input" and not n.host]


def _aten_call(node: ast.AST) -> tuple[str, str] | None:
    """(op, overload) when `node` calls torch.ops.aten.<op>.<overload>, else None."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    parts, target = [], node.func
    while isinstance(target, ast.Attribute):
        parts.append(target.attr)
        target = target.value
    if isinstance(target, ast.Name):
        parts.append(target.id)
    parts.reverse()
    if len(parts) == 5 and parts[:3] == ["torch", "ops", "aten"]:
        return parts[3], parts[4]
    return None


class _Reader:
    """Turns forward's statements into nodes, naming nested calls `_n<i>`."""

    def __init__(self, inputs: list[str]):
        self.nodes = {name: Node(name, "input") for name in inputs}
        self.nested = 0

    def literal(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            if node.id not in self.nodes:
                raise Unsupported(f"forward reads {node.id!r}, which is not an argument or an earlier result")
            return Ref(node.id)
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and isinstance(node.slice, ast.Constant)
        ):
            return Ref(self.literal(node.value).name, node.slice.value)
        if _aten_call(node):
            self.nested += 1
            return Ref(self.call(f"_n{self.nested}", node))
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.literal(item) for item in node.elts]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
            value = getattr(torch, node.attr, None)
            if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
                return value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float":
            return float(ast.literal_eval(node.args[0]))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.device":
            return torch.device("meta")
        if isinstance(node, ast.Attribute) and node.attr == "device" and isinstance(node.value, ast.Name):
            self.literal(node.value)  # an argument's or an earlier result's device: where the kernel runs
            return torch.device("meta")
        try:
            return ast.literal_eval(node)
        except ValueError as exc:
            raise Unsupported(f"forward passes {ast.unparse(node)}, which is not a literal") from exc

    def call(self, name: str, node: ast.Call) -> str:
        op, overload = _aten_call(node)
        args = tuple(self.literal(a) for a in node.args)
        kwargs = {k.arg: self.literal(k.value) for k in node.keywords}
        self.nodes[name] = Node(name, op, overload, args, kwargs)
        return name


def _forward(source: str) -> ast.FunctionDef:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise Unsupported("the reference does not parse") from exc
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Model":
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    return fn
    raise Unsupported("the reference has no Model.forward")


def parse_forward(source: str) -> Graph:
    """The graph of forward's aten calls; raises Unsupported for anything but straight-line calls."""
    fn = _forward(source)
    inputs = [a.arg for a in fn.args.args[1:]]
    reader = _Reader(inputs)
    outputs: list[Ref] = []
    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if not _aten_call(stmt.value):
                raise Unsupported(f"`{ast.unparse(stmt)}` is not a torch.ops.aten call")
            reader.call(stmt.targets[0].id, stmt.value)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
            outputs = [reader.literal(v) for v in values]
            if not all(isinstance(o, Ref) for o in outputs):
                raise Unsupported("forward returns something other than tensors it computed")
        else:
            raise Unsupported(f"`{ast.unparse(stmt)}` is not a straight-line aten call")
    if not outputs:
        raise Unsupported("forward returns nothing")
    return Graph(inputs, reader.nodes, outputs)


def _resolve(value: Any, graph: Graph) -> Any:
    if isinstance(value, Ref):
        return graph.value(value)
    if isinstance(value, list):
        return [_resolve(v, graph) for v in value]
    return value


def reduction_args(node: Node) -> tuple[object, bool, float | None]:
    """A captured reduction's dims, keepdim, and (for var) its correction, wherever the call put them;
    Unsupported where it reduces every dimension (the kernels reduce the last one)."""
    args, kw = node.args, node.kwargs or {}
    dims = args[1] if len(args) > 1 else kw.get("dim")
    keepdim = args[2] if len(args) > 2 else kw.get("keepdim", False)
    if dims is None:
        raise Unsupported(f"{node.aten} reduces every dimension; my kernels reduce the last one")
    correction = None
    if node.op == "var":
        correction = kw.get("correction", 1 if kw.get("unbiased", True) else 0)
        correction = float(correction if correction is not None else 1)
    return dims, keepdim, correction


def refs_of(node: Node) -> list[Ref]:
    found = [a for a in node.args if isinstance(a, Ref)] + [
        v for v in (node.kwargs or {}).values() if isinstance(v, Ref)
    ]
    return found + [r for a in node.args if isinstance(a, list) for r in a if isinstance(r, Ref)]


def infer(graph: Graph, shapes: list[list[int]], dtypes: list[str]) -> Graph:
    """Shapes and dtypes of every value, by running each call on meta tensors; marks input views."""
    if len(shapes) != len(graph.inputs) or len(dtypes) != len(graph.inputs):
        raise Unsupported("forward's arguments are not all tensors")
    for name, shape, dtype in zip(graph.inputs, shapes, dtypes):
        if dtype not in _DTYPES:
            raise Unsupported(f"input {name} is {dtype}; my kernels read float32, float16, bfloat16 and bool")
        graph.nodes[name].meta = torch.empty(shape, dtype=_DTYPES[dtype], device="meta")
    for node in graph.nodes.values():
        if node.op == "input":
            continue
        packet = getattr(torch.ops.aten, node.op, None)
        overload = getattr(packet, node.overload, None) if packet is not None else None
        if overload is None:
            raise Unsupported(f"aten.{node.op}.{node.overload} is not an aten op")
        args = [_resolve(a, graph) for a in node.args]
        kwargs = {k: _resolve(v, graph) for k, v in (node.kwargs or {}).items()}
        try:
            node.meta = overload(*args, **kwargs)
        except Exception as exc:
            raise Unsupported(f"{node.aten} does not run on meta tensors ({type(exc).__name__})") from exc
        if isinstance(node.meta, list):
            node.meta = tuple(node.meta)
        sources = refs_of(node)
        node.host = (
            node.op in VIEW_OPS
            and bool(sources)
            and all(graph.nodes[r.name].op == "input" or graph.nodes[r.name].host for r in sources)
        )
    return graph
