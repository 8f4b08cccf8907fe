"""Lowers a graph of aten calls to the body of one Triton kernel: pointwise ops, reductions over the
last dimension, and the norms and softmaxes written in terms of them. A pointwise graph whose inputs
are either laid out like its output over the trailing dimensions or constant along them (per-channel
vectors beside an N, C, H, W tensor) becomes a plane kernel: rows over the leading dimensions, the
per-row values computed once a row, and a contiguous run of columns per row.

Every value is computed in fp32 registers (bool for masks) and rounded to its 16-bit dtype where
eager PyTorch would round it, so the kernel matches the reference the way eager does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from harness.llm.offline.expressions import (
    BATCH_NORMS,
    COMPARE,
    IDENTITY,
    NORMS,
    REDUCTIONS,
    SCANS,
    TL_DTYPES,
    UNARY,
    elu_args,
    gelu,
    number,
    power,
)
from harness.llm.offline.graph import Graph, Node, Ref, Unsupported, reduction_args, refs_of


@dataclass
class Val:
    var: str
    per_row: bool  # constant along the body's columns: one value per row, broadcast along them


@dataclass
class Body:
    """The kernel body for one graph: what it loads, the lines that compute, and what it stores."""

    kind: str  # pointwise | rows | planes
    shape: list[int]
    col_dims: int = 0  # trailing dimensions a row spans: 0 flat (pointwise), 1 for rows, up to rank - 1 for planes
    inputs: list[Ref] = field(default_factory=list)  # host values the kernel reads, in argument order
    per_row_inputs: list[bool] = field(default_factory=list)
    # Inputs the same in every row (a norm's weight beside [tokens, hidden] rows): a row kernel loads
    # them once a program as [1, BLOCK], not once a row.
    per_col_inputs: list[bool] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    outputs: list[tuple[str, torch.dtype, bool]] = field(default_factory=list)  # (var, dtype, per_row)


def _shape_of(meta) -> list[int]:
    if not isinstance(meta, torch.Tensor):
        raise Unsupported("a multi-output call's whole result is used as a tensor")
    return list(meta.shape)


def _strip(shape: list[int]) -> list[int]:
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


class Lowering:
    def __init__(self, graph: Graph, body: Body):
        self.graph, self.body = graph, body
        self.values: dict[tuple[str, int | None], Val] = {}
        self.count = 0

    # -- values --------------------------------------------------------------------------------
    def fresh(self, expr: str, per_row: bool, dtype: torch.dtype | None = None) -> Val:
        self.count += 1
        var = f"v{self.count}"
        self.body.lines.append(f"{var} = {expr}")
        if dtype == torch.float16:
            self.body.lines.append(f"{var} = {var}.to(tl.float16).to(tl.float32)")
        elif dtype == torch.bfloat16:
            self.body.lines.append(f"{var} = _round_bf16({var})")
        return Val(var, per_row)

    def per_row(self, meta) -> bool:
        shape, k = _shape_of(meta), self.body.col_dims
        if not k or math.prod(self.body.shape[-k:]) == 1:
            return False
        return all(n == 1 for n in ([1] * k + shape)[-k:])

    def per_col(self, meta) -> bool:
        """Whether the input is the same in every row of a row kernel. Only for rows: a plane kernel's launch
        may split its columns at fewer trailing dimensions than it was written for, and an input the same
        in every row of the written split would not be in the launched one."""
        if self.body.kind != "rows":
            return False
        shape = _shape_of(meta)
        lead = ([1] * len(self.body.shape) + shape)[-len(self.body.shape) : -1]
        return all(n == 1 for n in lead)

    def operand(self, value) -> Val | str | None:
        if value is None or not isinstance(value, Ref):
            return None if value is None else number(value)
        key = (value.name, value.index)
        if key in self.values:
            return self.values[key]
        node = self.graph.nodes[value.name]
        if node.op != "input" and not node.host:
            raise Unsupported(f"output {value.index} of {node.aten} is used; my kernels compute only its first")
        meta = self.graph.value(value)
        if meta.dtype not in TL_DTYPES and meta.dtype != torch.bool:
            raise Unsupported(f"{value.name} is {meta.dtype}; my kernels read float and bool tensors")
        shape, full = _strip(_shape_of(meta)), _strip(list(self.body.shape))
        if len(shape) > len(full) or any(s not in (1, f) for s, f in zip(reversed(shape), reversed(full))):
            raise Unsupported(f"{value.name} of shape {list(meta.shape)} does not broadcast to {self.body.shape}")
        k = len(self.body.inputs)
        self.body.inputs.append(value)
        per_row = self.per_row(meta)
        per_col = not per_row and self.per_col(meta)
        self.body.per_row_inputs.append(per_row)
        self.body.per_col_inputs.append(per_col)
        mask = "rmask" if per_row else "cmask" if per_col else "mask"
        load = f"tl.load(in{k} + off{k}, mask={mask}, other=0)"
        val = self.fresh(f"{load} != 0" if meta.dtype == torch.bool else f"{load}.to(tl.float32)", per_row)
        self.values[key] = val
        return val

    @staticmethod
    def code(x) -> str:
        return x.var if isinstance(x, Val) else x

    # -- reductions ----------------------------------------------------------------------------
    def reduce(self, kind: str, a: Val, out_dtype, correction: float = 1.0) -> Val:
        if a.per_row:  # reducing a dimension of size one
            return self.fresh({"var": "0.0 * ", "logsumexp": ""}.get(kind, "") + a.var, True, out_dtype)
        masked = lambda fill, x: f"tl.where(mask, {x}, {fill})"
        if kind in ("sum", "mean"):
            total = f"tl.sum({masked('0.0', a.var)}, axis=1, keep_dims=True)"
            return self.fresh(f"{total} / cols" if kind == "mean" else total, True, out_dtype)
        if kind in ("amax", "amin"):
            fill, fn = ('float("-inf")', "tl.max") if kind == "amax" else ('float("inf")', "tl.min")
            return self.fresh(f"{fn}({masked(fill, a.var)}, axis=1, keep_dims=True)", True, out_dtype)
        if kind == "logsumexp":
            top = self.reduce("amax", a, None)
            total = self.reduce("sum", self.fresh(f"tl.exp({a.var} - {top.var})", False), None)
            return self.fresh(f"{top.var} + tl.log({total.var})", True, out_dtype)
        mean = self.reduce("mean", a, None)
        diff = self.fresh(f"{masked('0.0', f'{a.var} - {mean.var}')}", False)
        return self.fresh(
            f"tl.sum({diff.var} * {diff.var}, axis=1, keep_dims=True) / (cols - {correction})", True, out_dtype
        )

    def check_last_dim(self, node: Node, dims, keepdim) -> None:
        rank = len(_shape_of(self.graph.value(node.args[0])))
        dims = dims if isinstance(dims, list) else [dims]
        if self.body.kind != "rows" or not keepdim or [d % max(rank, 1) for d in dims] != [rank - 1]:
            raise Unsupported(f"{node.aten} reduces other than the last dimension with keepdim")

    # -- ops -----------------------------------------------------------------------------------
    def lower(self, node: Node) -> None:
        meta = node.meta[0] if isinstance(node.meta, tuple) else node.meta
        if meta.dtype not in TL_DTYPES and meta.dtype != torch.bool:
            raise Unsupported(f"{node.aten} makes a {meta.dtype} tensor; my kernels compute float and bool")
        dtype, per_row = meta.dtype, self.per_row(meta)
        val = self.lower_op(node, dtype, per_row)
        self.values[(node.name, None)] = self.values[(node.name, 0)] = val

    def lower_op(self, node: Node, dtype, per_row: bool) -> Val:
        op, args, kw = node.op, node.args, node.kwargs or {}
        arg = lambda i, name=None, default=None: (
            args[i] if len(args) > i else kw.get(name, default) if name else default
        )
        x = lambda i, name=None, default=None: self.code(self.operand(arg(i, name, default)))
        fresh = lambda expr: self.fresh(expr, per_row, dtype)
        if op in UNARY:
            return fresh(UNARY[op](x(0)))
        if op in IDENTITY or op == "copy":
            source = x(1) if op == "copy" else x(0)
            return fresh(f"({source} != 0)" if dtype == torch.bool else f"({source}).to(tl.float32)")
        if op in ("view", "_unsafe_view", "reshape", "as_strided", "alias", "expand"):
            if _strip(_shape_of(node.meta)) != _strip(_shape_of(self.graph.value(args[0]))):
                raise Unsupported(f"{node.aten} re-shapes a computed value; my kernels keep one layout")
            return self.operand(args[0])
        if op in ("add", "sub"):
            alpha = arg(2, "alpha", 1)
            b = x(1) if alpha == 1 else f"({x(1)} * {number(alpha)})"
            return fresh(f"({x(0)} {'+' if op == 'add' else '-'} {b})")
        if op == "rsub":
            return fresh(f"({x(1)} - {x(0)} * {number(arg(2, 'alpha', 1))})")
        if op in ("mul", "div") and arg(2, "rounding_mode") is None:
            return fresh(f"({x(0)} {'*' if op == 'mul' else '/'} {x(1)})")
        if op in ("maximum", "minimum"):
            return fresh(f"tl.{op}({x(0)}, {x(1)})")
        if op in COMPARE:
            return self.fresh(f"({x(0)} {COMPARE[op]} {x(1)})", per_row)
        if op == "pow" and node.overload == "Tensor_Scalar":
            return fresh(power(x(0), args[1]))
        if op == "pow" and node.overload == "Scalar":
            return fresh(f"tl.exp2({x(1)} * {math.log2(args[0])!r})")
        if op == "gelu":
            return fresh(gelu(x(0), arg(1, "approximate", "none")))
        if op == "softplus":
            beta, threshold = float(arg(1, "beta", 1.0)), float(arg(2, "threshold", 20.0))
            a = x(0)
            soft = f"tl.log(1.0 + tl.exp({a} * {beta!r})) / {beta!r}"
            return fresh(f"tl.where({a} * {beta!r} > {threshold!r}, {a}, {soft})")
        if op in ("clamp", "clamp_min", "clamp_max", "hardtanh"):
            low = arg(1, "min") if op != "clamp_max" else None
            high = arg(2, "max") if op == "clamp" else arg(1, "max") if op == "clamp_max" else None
            if op == "hardtanh":
                low, high = arg(1, "min_val", -1.0), arg(2, "max_val", 1.0)
            expr = x(0)
            expr = expr if low is None else f"tl.maximum({expr}, {self.code(self.operand(low))})"
            return fresh(expr if high is None else f"tl.minimum({expr}, {self.code(self.operand(high))})")
        if op == "leaky_relu":
            return fresh(f"tl.where({x(0)} > 0, {x(0)}, {x(0)} * {number(arg(1, 'negative_slope', 0.01))})")
        if op == "elu":  # SELU too: aten.elu with its alpha and scale
            scale, input_scale, negative = elu_args(arg)
            a = x(0)
            return fresh(
                f"tl.where({a} > 0, {a} * {number(scale)}, _expm1({a} * {number(input_scale)}) * {number(negative)})"
            )
        if op == "where":
            return fresh(f"tl.where({x(0)}, {x(1)}, {x(2)})")
        if op == "masked_fill":
            return fresh(f"tl.where({x(1)}, {x(2)}, {x(0)})")
        if op in REDUCTIONS:
            return self.lower_reduction(node, dtype)
        if op in NORMS:
            return self.lower_norm(node, dtype)
        if op in BATCH_NORMS:
            return self.lower_batch_norm(node, dtype)
        if op in SCANS:
            return self.lower_scan(node, dtype)
        raise Unsupported(f"{node.aten} is neither pointwise nor a last-dimension reduction")

    def lower_scan(self, node: Node, dtype) -> Val:
        self.check_last_dim(node, node.args[1], True)
        a = self.operand(node.args[0])
        if a.per_row:  # a scan along a dimension of size one is its input
            return self.fresh(a.var, True, dtype)
        # Columns past the row's end hold the identity: they come after every real column, so no
        # real prefix reads them, and the tree the scan adds in is more exact than eager's sequence.
        scan, identity = SCANS[node.op]
        return self.fresh(f"{scan}(tl.where(mask, {a.var}, {identity}), axis=1)", False, dtype)

    def lower_reduction(self, node: Node, dtype) -> Val:
        dims, keepdim, correction = reduction_args(node)
        self.check_last_dim(node, dims, keepdim)
        a = self.operand(node.args[0])
        if correction is not None:
            return self.reduce("var", a, dtype, correction)
        return self.reduce(node.op, a, dtype)

    def lower_norm(self, node: Node, dtype) -> Val:
        op, args = node.op, node.args
        if op in ("_softmax", "_log_softmax", "softmax", "log_softmax"):
            self.check_last_dim(node, args[1], True)
            a = self.operand(args[0])
            top = self.reduce("amax", a, None)
            shifted = self.fresh(f"{a.var} - {top.var}", a.per_row)
            e = self.fresh(f"tl.exp({shifted.var})", a.per_row)
            total = self.reduce("sum", e, None)
            if op.endswith("log_softmax"):
                return self.fresh(f"{shifted.var} - tl.log({total.var})", a.per_row, dtype)
            return self.fresh(f"{e.var} / {total.var}", a.per_row, dtype)
        normalized = args[1]
        if len(normalized) != 1:
            raise Unsupported(f"{node.aten} normalises {len(normalized)} dimensions; my kernels normalise the last")
        self.check_last_dim(node, [-1], True)
        a = self.operand(args[0])
        if op == "native_layer_norm":
            weight, bias, eps = args[2], args[3], args[4]
            mean = self.reduce("mean", a, None)
            diff = self.fresh(f"{a.var} - {mean.var}", False)
            var = self.reduce("sum", self.fresh(f"{diff.var} * {diff.var}", False), None)
            y = f"{diff.var} * tl.rsqrt({var.var} / cols + {eps!r})"
        else:
            weight, eps = args[2] if len(args) > 2 else None, args[3] if len(args) > 3 else None
            bias = None
            eps = torch.finfo(self.graph.value(args[0]).dtype).eps if eps is None else eps
            square = self.reduce("mean", self.fresh(f"{a.var} * {a.var}", False), None)
            y = f"{a.var} * tl.rsqrt({square.var} + {eps!r})"
        y = y if weight is None else f"({y}) * {self.code(self.operand(weight))}"
        return self.fresh(y if bias is None else f"{y} + {self.code(self.operand(bias))}", False, dtype)

    def lower_batch_norm(self, node: Node, dtype) -> Val:
        args = list(node.args)
        if node.op == "_native_batch_norm_legit_no_training":
            args = [*args[:5], False, *args[5:]]
        x_ref, weight, bias, mean, var, training, eps = *args[:6], args[7]
        if training:
            raise Unsupported(f"{node.aten} in training mode computes batch statistics; I write inference only")
        rank = len(_shape_of(self.graph.value(x_ref)))
        w, b, m, v = (self.operand(self.channel_view(r, rank)) for r in (weight, bias, mean, var))
        # One scale per channel: a plane kernel computes it once a row, not once an element.
        inv = f"tl.rsqrt({v.var} + {eps!r})"
        scale = self.fresh(inv if w is None else f"{inv} * {w.var}", v.per_row)
        y = f"({self.code(self.operand(x_ref))} - {m.var}) * {scale.var}"
        return self.fresh(y if b is None else f"{y} + {b.var}", False, dtype)

    def channel_view(self, ref, rank: int) -> Ref | None:
        """A per-channel vector as a [C, 1, ...] view, so it broadcasts along dim 1 of an N, C, ... input."""
        if ref is None:
            return None
        node = self.graph.nodes[ref.name]
        if node.op != "input" and not node.host:
            raise Unsupported("batch-norm statistics are computed in the graph; my kernel reads them as inputs")
        name = f"_c{ref.name}"
        meta = self.graph.value(ref)
        shape = [meta.shape[0]] + [1] * (rank - 2)
        self.graph.nodes[name] = Node(name, "view", "default", (ref, shape), {}, meta.view(shape), host=True)
        return Ref(name)


def lower(graph: Graph) -> Body:
    """The kernel body computing the graph's outputs; raises Unsupported when no one kernel can."""
    kernel = graph.kernel_nodes()
    if not kernel:
        raise Unsupported("forward only re-views its inputs; there is nothing for a kernel to compute")
    for ref in graph.outputs:
        node = graph.nodes[ref.name]
        if node.op == "input" or node.host:
            raise Unsupported("forward returns a view of an input; my kernels write new tensors")
        if ref.index not in (None, 0):
            raise Unsupported(f"forward returns output {ref.index} of {node.aten}; my kernels compute only its first")
    rowwise = REDUCTIONS | NORMS | SCANS.keys()
    reduces = any(n.op in rowwise for n in kernel)
    shapes = [_shape_of(graph.value(ref)) for ref in graph.outputs]
    # A row kernel spans the rows its reductions read, which a per-row output alone does not show.
    spans = shapes + [list(graph.value(r).shape) for n in kernel for r in refs_of(n) if n.op in rowwise]
    full = max(spans if reduces else shapes, key=lambda s: math.prod(s) if s else 1)
    if reduces and full and full[-1] > 32768:
        raise Unsupported(f"rows of {full[-1]} elements do not fit in registers; my row kernels stop at 32768")
    body = _lowered(graph, Body("rows", full, col_dims=1) if reduces else Body("pointwise", full), shapes)
    planes = 0 if reduces else plane_dims(full, [_shape_of(graph.value(r)) for r in body.inputs])
    return _lowered(graph, Body("planes", full, col_dims=planes), shapes) if planes else body


def _lowered(graph: Graph, body: Body, shapes: list[list[int]]) -> Body:
    lowering = Lowering(graph, body)
    for node in graph.kernel_nodes():
        lowering.lower(node)
    full = body.shape
    for ref, shape in zip(graph.outputs, shapes):
        per_row = body.kind == "rows" and shape == [*full[:-1], 1] and shape != full
        if shape != full and not per_row:
            raise Unsupported(f"forward returns tensors of shapes {shapes}; my kernels write one shape")
        body.outputs.append((lowering.values[(ref.name, ref.index)].var, graph.value(ref).dtype, per_row))
    return body


def plane_dims(shape: list[int], inputs: list[list[int]]) -> int:
    """How many trailing dimensions a plane kernel's rows span: the most along which every input either
    runs as the output does or is constant, when some input is constant along them but not across the
    rows (a per-channel vector beside N, C, H, W tensors); 0 when no split saves per-element work."""
    for k in range(len(shape) - 1, 0, -1):
        tail = shape[-k:]
        if math.prod(tail) == 1:
            return 0
        ends = [([1] * k + s)[-k:] for s in inputs]
        per_row = [all(n == 1 for n in end) for end in ends]
        fits = all(constant or end == tail for constant, end in zip(per_row, ends))
        if fits and any(constant and math.prod(s) > 1 for constant, s in zip(per_row, inputs)):
            return k
    return 0
