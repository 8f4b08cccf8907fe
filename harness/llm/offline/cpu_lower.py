"""Lowers a captured graph of aten calls to the body of one C++ kernel for platform `cpu`.

The kernel walks the output as rows of its last dimension. A row kernel computes each row's
reductions (sums, means, maxima, the norms and softmaxes written in terms of them) in loops over
the row's columns, then the pointwise ops in one last loop that writes the row; a matmul kernel
computes a tile of `mm` or `addmm` and runs the pointwise ops after it (its epilogue) on the tile
before it is stored. Pointwise values are recomputed in each loop that reads them rather than
stored, so a row is read from memory once per loop and nothing is written but the outputs. A graph
returning several tensors (a residual sum and its norm) writes each in the same last loop.

Every input is read as a view of the output's shape (a broadcast is a stride of 0), addressed by
the row's leading indices and the column; every value is computed in float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from harness.llm.offline.expressions import BATCH_NORMS, IDENTITY, NORMS, REDUCTIONS, elu_args
from harness.llm.offline.graph import Graph, Node, Ref, Unsupported, reduction_args, refs_of

# C++ for aten's unary ops; EXPF, ERFF, TANHF and sigmoid_f come from templates/cpu/common.cpp.
UNARY = {
    "neg": "(-{0})",
    "exp": "EXPF({0})",
    "log": "logf({0})",
    "sqrt": "sqrtf({0})",
    "rsqrt": "(1.0f / sqrtf({0}))",
    "abs": "fabsf({0})",
    "reciprocal": "(1.0f / {0})",
    "sin": "sinf({0})",
    "cos": "cosf({0})",
    "erf": "ERFF({0})",
    "sigmoid": "sigmoid_f({0})",
    "tanh": "TANHF({0})",
    "relu": "fmaxf({0}, 0.0f)",
    "hardsigmoid": "(fminf(fmaxf({0} + 3.0f, 0.0f), 6.0f) / 6.0f)",
    "silu": "({0} * sigmoid_f({0}))",
}
# Views of a computed value that keep its elements in row order.
_SAME_ROWS = frozenset(["view", "_unsafe_view", "reshape", "as_strided", "alias", "expand", "unsqueeze", "squeeze"])
_MATMULS = frozenset(["mm", "addmm"])
# OpenMP reduction operator, initial value and update of each accumulating loop.
_LOOPS = {
    "sum": ("+", "0.0f", "{acc} += {x};"),
    "amax": ("max", "-INFINITY", "{acc} = fmaxf({acc}, {x});"),
    "amin": ("min", "INFINITY", "{acc} = fminf({acc}, {x});"),
}


def number(value) -> str:
    """A C++ float literal."""
    if isinstance(value, bool):
        return "1.0f" if value else "0.0f"
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    return f"{float(value)!r}f"


@dataclass(frozen=True)
class Val:
    var: str
    row: bool  # one value a row, computed before the row's column loops


@dataclass
class CppKernel:
    """One C++ kernel for a graph: what it reads, the statements of one row, and what it writes."""

    kind: str  # rows | matmul
    shape: list[int]  # the rows and columns it walks: the largest tensor it reads or writes
    out_shapes: list[list[int]]  # each output's shape: `shape`, or one value a row
    inputs: list[Ref] = field(default_factory=list)  # host values read as views of `shape`, in order
    spans: list[list[int]] = field(default_factory=list)  # the shape each input is broadcast to first
    lines: list[str] = field(default_factory=list)  # C++ statements run once a row (or a tile's row)
    operands: list[Ref] = field(default_factory=list)  # a matmul's A and B
    store: list[str] = field(default_factory=list)  # C++ statements computing the outputs at column c
    # Per output, the variable holding it at column c; empty for one value a row (stored once a row).
    results: list[str] = field(default_factory=list)


def _broadcasts(shape: list[int], to: list[int]) -> bool:
    return len(shape) <= len(to) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(to)))


class CppLowering:
    def __init__(self, graph: Graph, kernel: CppKernel):
        self.graph, self.kernel = graph, kernel
        self.values: dict[tuple[str, int | None], Val] = {}
        self.elements: dict[str, tuple[str, list[str]]] = {}  # var -> (expression, element vars it reads)
        self.count = 0

    @property
    def cols(self) -> int:
        return self.kernel.shape[-1] if self.kernel.shape else 1

    def fresh(self, expr: str, operands: list, element: bool | None = None) -> Val:
        """A value computed by `expr`: a column-loop statement when it varies along the row, else once a row."""
        self.count += 1
        var = f"v{self.count}"
        deps = [o.var for o in operands if isinstance(o, Val) and not o.row]
        if bool(deps) if element is None else element:
            self.elements[var] = (expr, deps)
            return Val(var, False)
        self.kernel.lines.append(f"const float {var} = {expr};")
        return Val(var, True)

    def column_statements(self, targets: list[Val]) -> list[str]:
        """The statements computing `targets` at column c, in the order they were lowered."""
        needed: set[str] = set()
        stack = [t.var for t in targets if not t.row]
        while stack:
            var = stack.pop()
            if var not in needed and var in self.elements:
                needed.add(var)
                stack += self.elements[var][1]
        return [f"const float {var} = {expr};" for var, (expr, _) in self.elements.items() if var in needed]

    # -- inputs ------------------------------------------------------------------------------
    def operand(self, value, span: list[int] | None = None) -> Val | str:
        """A graph value or a number; an input is read as a view of the kernel's shape through `span`
        (the shape of the call reading it) when it does not broadcast to that shape directly."""
        if not isinstance(value, Ref):
            if isinstance(value, (int, float)):
                return number(value)
            raise Unsupported(f"an argument {value!r} is neither a tensor nor a number")
        key = (value.name, value.index)
        if key in self.values:
            return self.values[key]
        node = self.graph.nodes[value.name]
        if node.op != "input" and not node.host:
            raise Unsupported(f"output {value.index} of {node.aten} is used; my kernels compute only its first")
        meta = self.graph.value(value)
        if meta.dtype != torch.float32:
            raise Unsupported(f"{value.name} is {meta.dtype}; my CPU kernels read float32")
        shape, full = list(meta.shape), self.kernel.shape
        span = full if _broadcasts(shape, full) else (span or shape)
        try:
            meta.expand(span).view(full)
        except RuntimeError as exc:
            raise Unsupported(f"{value.name} of shape {shape} is not read row by row as {full}") from exc
        k = len(self.kernel.inputs)
        self.kernel.inputs.append(value)
        self.kernel.spans.append(list(span))
        per_row = self.cols > 1 and ([1, *shape])[-1] == 1
        val = self.fresh(f"x{k}[0]" if per_row else f"x{k}[c]", [], element=not per_row)
        self.values[key] = val
        return val

    # -- reductions --------------------------------------------------------------------------
    def loop(self, kind: str, a: Val) -> Val:
        """One loop over the row's columns accumulating `a` by sum, amax or amin."""
        if self.kernel.kind == "matmul":
            raise Unsupported("a reduction follows the matmul; my matmul template runs pointwise epilogues")
        if a.row:
            return self.fresh(f"{a.var} * (float)COLS" if kind == "sum" else a.var, [a])
        self.count += 1
        acc = f"v{self.count}"
        op, init, update = _LOOPS[kind]
        body = [*self.column_statements([a]), update.format(acc=acc, x=a.var)]
        self.kernel.lines += [
            f"float {acc} = {init};",
            f"#pragma omp simd reduction({op}:{acc})",
            "for (long c = 0; c < COLS; ++c) {",
            *(f"    {line}" for line in body),
            "}",
        ]
        return Val(acc, True)

    def reduce(self, kind: str, a: Val, correction: float = 1.0) -> Val:
        if kind in ("sum", "amax", "amin"):
            return self.loop(kind, a)
        if kind == "mean":
            return self.fresh(f"{self.loop('sum', a).var} / (float)COLS", [])
        if kind == "logsumexp":
            top = self.loop("amax", a)
            total = self.loop("sum", self.fresh(f"EXPF({a.var} - {top.var})", [a, top]))
            return self.fresh(f"{top.var} + logf({total.var})", [])
        mean = self.reduce("mean", a)
        diff = self.fresh(f"({a.var} - {mean.var})", [a, mean])
        square = self.loop("sum", self.fresh(f"{diff.var} * {diff.var}", [diff]))
        return self.fresh(f"{square.var} / ((float)COLS - {number(correction)})", [])

    def check_last_dim(self, node: Node, dims, keepdim) -> None:
        meta = self.graph.value(node.args[0])
        rank, dims = meta.dim(), dims if isinstance(dims, list) else [dims]
        if not keepdim or [d % max(rank, 1) for d in dims] != [rank - 1] or list(meta.shape) != self.kernel.shape:
            raise Unsupported(f"{node.aten} reduces other than the last dimension of the whole input with keepdim")

    # -- ops ---------------------------------------------------------------------------------
    def lower(self, node: Node) -> None:
        meta = node.meta[0] if isinstance(node.meta, tuple) else node.meta
        if meta.dtype != torch.float32:
            raise Unsupported(f"{node.aten} makes a {meta.dtype} tensor; my CPU kernels compute float32")
        val = self.lower_op(node, list(meta.shape))
        self.values[(node.name, None)] = self.values[(node.name, 0)] = val

    def lower_op(self, node: Node, shape: list[int]) -> Val:
        op, args, kw = node.op, node.args, node.kwargs or {}

        def arg(i, name=None, default=None):
            return args[i] if len(args) > i else kw.get(name, default) if name else default

        def x(i, name=None, default=None):
            return self.operand(arg(i, name, default), shape)

        def fresh(expr: str, *operands) -> Val:
            return self.fresh(expr.format(*(o.var if isinstance(o, Val) else o for o in operands)), list(operands))

        if op in UNARY:
            return fresh(UNARY[op], x(0))
        if op in IDENTITY or op == "copy":
            return self.operand(arg(1 if op == "copy" else 0), shape)
        if op in _SAME_ROWS:
            return self.same_rows(node)
        if op in ("add", "sub"):
            alpha = arg(2, "alpha", 1)
            return fresh("({} " + ("+" if op == "add" else "-") + " {} * {})", x(0), x(1), number(alpha))
        if op == "rsub":
            return fresh("({} - {} * {})", x(1), x(0), number(arg(2, "alpha", 1)))
        if op in ("mul", "div") and arg(2, "rounding_mode") is None:
            return fresh("({} " + ("*" if op == "mul" else "/") + " {})", x(0), x(1))
        if op in ("maximum", "minimum"):
            return fresh("f" + op[:3] + "f({}, {})", x(0), x(1))
        if op == "pow" and node.overload == "Tensor_Scalar":
            return fresh("({0} * {0})" if args[1] == 2 else "powf({0}, {1})", x(0), number(args[1]))
        if op == "gelu":
            if arg(1, "approximate", "none") == "tanh":
                # 0.5 * (1 + tanh(u)) is sigmoid(2u): one exp and one divide.
                return fresh("({0} * sigmoid_f(1.5957691216057308f * ({0} + 0.044715f * {0} * {0} * {0})))", x(0))
            return fresh("(0.5f * {0} * (1.0f + ERFF({0} * 0.7071067811865476f)))", x(0))
        if op in ("clamp", "clamp_min", "clamp_max", "hardtanh"):
            return self.clamp(node, x(0), arg, shape)
        if op == "leaky_relu":
            return fresh("({0} > 0.0f ? {0} : {0} * {1})", x(0), number(arg(1, "negative_slope", 0.01)))
        if op == "elu":  # SELU too: aten.elu with its alpha and scale
            scale, input_scale, negative = elu_args(arg)
            template = "({0} > 0.0f ? {0} * {1} : expm1f({0} * {2}) * {3})"
            return fresh(template, x(0), number(scale), number(input_scale), number(negative))
        if op == "softplus":  # log1p keeps softplus of a very negative input, which log(1 + e) loses
            beta, threshold = float(arg(1, "beta", 1.0)), float(arg(2, "threshold", 20.0))
            template = "({0} * {1} > {2} ? {0} : log1pf(EXPF({0} * {1})) / {1})"
            return fresh(template, x(0), number(beta), number(threshold))
        if op in _MATMULS:
            return self.matmul(node, shape)
        if op in REDUCTIONS:
            return self.reduction(node)
        if op in NORMS:
            return self.norm(node)
        if op in BATCH_NORMS:
            raise Unsupported(f"{node.aten} normalises over channels; my CPU kernels normalise rows")
        raise Unsupported(f"{node.aten} is neither pointwise, a last-dimension reduction, a norm nor a matmul")

    def clamp(self, node: Node, a: Val, arg, shape: list[int]) -> Val:
        op = node.op
        low = arg(1, "min") if op in ("clamp", "clamp_min") else None
        high = arg(2, "max") if op == "clamp" else arg(1, "max") if op == "clamp_max" else None
        if op == "hardtanh":
            low, high = arg(1, "min_val", -1.0), arg(2, "max_val", 1.0)
        expr, operands = a.var, [a]
        for bound, fn in ((low, "fmaxf"), (high, "fminf")):
            if bound is not None:
                b = self.operand(bound, shape)
                operands.append(b)
                expr = f"{fn}({expr}, {b.var if isinstance(b, Val) else b})"
        return self.fresh(expr, operands)

    def same_rows(self, node: Node) -> Val:
        """A view of a computed value: the same elements in the same rows, or a broadcast of them."""
        source, meta = self.graph.value(node.args[0]), node.meta
        keeps_rows = (
            meta.numel() == source.numel()
            and list(meta.shape[-1:]) == list(source.shape[-1:])
            and meta.is_contiguous()
            and source.is_contiguous()
            and meta.storage_offset() == 0
        )
        if node.op == "expand" or keeps_rows:
            return self.operand(node.args[0])
        raise Unsupported(f"{node.aten} moves a computed value's elements; my kernels keep one layout")

    def matmul(self, node: Node, shape: list[int]) -> Val:
        if self.kernel.kind != "matmul" or self.kernel.operands:
            raise Unsupported(f"{node.aten} is not the first call of its chain; my matmul template starts with it")
        a, b = node.args[1:3] if node.op == "addmm" else node.args[:2]
        for ref in (a, b):
            read = self.graph.nodes[ref.name] if isinstance(ref, Ref) else None
            if read is None or (read.op != "input" and not read.host):
                raise Unsupported(f"{node.aten} multiplies a computed value; my matmul template reads inputs")
            if self.graph.value(ref).dtype != torch.float32:
                raise Unsupported(f"{node.aten} multiplies {self.graph.value(ref).dtype}; my CPU kernels read float32")
        self.kernel.operands = [a, b]
        product = Val("mm", False)  # the tile's accumulator, which the epilogue's loop reads as `mm`
        if node.op == "mm":
            return product
        kw = node.kwargs or {}
        beta, alpha = number(kw.get("beta", 1)), number(kw.get("alpha", 1))
        bias = self.operand(node.args[0], shape)
        bias_code = bias.var if isinstance(bias, Val) else bias
        return self.fresh(f"({beta} * {bias_code} + {alpha} * mm)", [bias, product], element=True)

    def reduction(self, node: Node) -> Val:
        dims, keepdim, correction = reduction_args(node)
        self.check_last_dim(node, dims, keepdim)
        a = self.operand(node.args[0])
        if correction is not None:
            return self.reduce("var", a, correction)
        return self.reduce(node.op, a)

    def norm(self, node: Node) -> Val:
        op, args = node.op, node.args
        if op in ("_softmax", "_log_softmax", "softmax", "log_softmax"):
            self.check_last_dim(node, args[1], True)
            a = self.operand(args[0])
            top = self.loop("amax", a)
            shifted = self.fresh(f"({a.var} - {top.var})", [a, top])
            e = self.fresh(f"EXPF({shifted.var})", [shifted])
            total = self.loop("sum", e)
            if op.endswith("log_softmax"):
                return self.fresh(f"({shifted.var} - logf({total.var}))", [shifted])
            return self.fresh(f"({e.var} / {total.var})", [e])
        if len(args[1]) != 1:
            raise Unsupported(f"{node.aten} normalises {len(args[1])} dimensions; my kernels normalise the last")
        self.check_last_dim(node, [-1], True)
        a = self.operand(args[0])
        if op == "native_layer_norm":
            weight, bias, eps = args[2], args[3], args[4]
            mean = self.reduce("mean", a)
            diff = self.fresh(f"({a.var} - {mean.var})", [a, mean])
            square = self.loop("sum", self.fresh(f"{diff.var} * {diff.var}", [diff]))
            rstd = self.fresh(f"1.0f / sqrtf({square.var} / (float)COLS + {number(eps)})", [])
            y = self.fresh(f"{diff.var} * {rstd.var}", [diff])
        else:
            weight, bias = args[2] if len(args) > 2 else None, None
            eps = args[3] if len(args) > 3 and args[3] is not None else torch.finfo(torch.float32).eps
            square = self.reduce("mean", self.fresh(f"{a.var} * {a.var}", [a]))
            rstd = self.fresh(f"1.0f / sqrtf({square.var} + {number(eps)})", [])
            y = self.fresh(f"{a.var} * {rstd.var}", [a])
        for term, sign in ((weight, "*"), (bias, "+")):
            if term is not None:
                t = self.operand(term)
                y = self.fresh(f"({y.var} {sign} {t.var})", [y, t])
        return y


def _shape(meta) -> list[int]:
    if not isinstance(meta, torch.Tensor):
        raise Unsupported("a multi-output call's whole result is used as a tensor")
    return list(meta.shape)


def lower_cpu(graph: Graph) -> CppKernel:
    """The C++ kernel computing the graph's outputs (each the rows it walks, or one value a row);
    raises Unsupported when no one row or matmul kernel can."""
    kernel_nodes = graph.kernel_nodes()
    if not kernel_nodes:
        raise Unsupported("forward only re-views its inputs; there is nothing for a kernel to compute")
    for out in graph.outputs:
        node = graph.nodes[out.name]
        if node.op == "input" or node.host or out.index not in (None, 0):
            raise Unsupported("forward returns an input's view or a call's statistics; my kernels write its result")
    out_shapes = [_shape(graph.value(out)) for out in graph.outputs]
    reads = [_shape(graph.value(r)) for n in kernel_nodes if n.op in REDUCTIONS | NORMS for r in refs_of(n)[:1]]
    shape = max([*out_shapes, *reads], key=lambda s: math.prod(s))
    if math.prod(shape) == 0:
        raise Unsupported(f"the output has shape {out_shapes[0]}, with no elements to compute")
    row_outputs = [s == [*shape[:-1], 1] and s != shape for s in out_shapes]
    for out_shape, row_output in zip(out_shapes, row_outputs):
        if not row_output and (math.prod(out_shape) != math.prod(shape) or out_shape[-1:] != shape[-1:]):
            raise Unsupported(f"forward returns a tensor of shape {out_shape}; my kernels write rows of {shape}")
    kind = "matmul" if kernel_nodes[0].op in _MATMULS else "rows"
    if kind == "matmul" and any(row_outputs):
        raise Unsupported("the matmul's chain ends in a reduction; my matmul template runs pointwise epilogues")
    kernel = CppKernel(kind, shape, out_shapes)
    lowering = CppLowering(graph, kernel)
    for n in kernel_nodes:
        lowering.lower(n)
    if kind == "matmul":
        first = kernel_nodes[0].meta
        if first.shape[-1] != shape[-1] or first.numel() != math.prod(shape):
            raise Unsupported("the matmul's epilogue changes its shape; my matmul template keeps the tile's")
    values = [lowering.values[(out.name, out.index)] for out in graph.outputs]
    for k, (value, row_output) in enumerate(zip(values, row_outputs)):
        if row_output and not value.row:
            raise Unsupported(f"forward returns {out_shapes[k]}, one value a row, that varies along the row")
        if row_output:
            kernel.lines.append(f"out[{k}][r] = {value.var};")
    kernel.results = ["" if row else value.var for value, row in zip(values, row_outputs)]
    kernel.store = lowering.column_statements([v for v, row in zip(values, row_outputs) if not row])
    return kernel
