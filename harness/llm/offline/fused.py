"""Triton candidates from a lowered graph: the kernel's text, its launch sizes, and ModelNew."""

from __future__ import annotations

import math
from pathlib import Path
from string import Template

import torch

from harness.llm.offline.graph import Graph, Node, Ref
from harness.llm.offline.lower import Body

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates" / "triton"
_INDEX_LIMIT = 2**31 - 1


def _rank(body: Body) -> int:
    """Dimensions the kernel's flat or row index runs over: a row kernel keeps at least one for columns."""
    return max(1, len(body.shape) - (body.kind != "pointwise"))


def _needs_int64(body: Body, graph: Graph) -> bool:
    sizes = [math.prod(body.shape)] + [_extent(graph.value(r)) for r in body.inputs]
    return max(sizes) > _INDEX_LIMIT


def _extent(meta: torch.Tensor) -> int:
    """Elements from the start of the input's storage to its last element."""
    return meta.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(meta.shape, meta.stride()))


def _offsets(index: str, rank: int, body: Body) -> list[str]:
    """Each input's element offset from a flat or row index, one static branch per count of dimensions
    left after coalescing (DIMS), so a contiguous launch does no division at all; a row kernel adds the
    column times the input's stride along its row (none for a per-row input). An input the same in every
    row (a norm's weight) is addressed by the column alone."""
    lines = [f"off{k} = c * cst{k}" for k in range(len(body.inputs)) if body.per_col_inputs[k]]
    for dims in range(1, rank + 1):
        branch = [f"rem = {index}"] if dims > 1 else []
        for d in range(dims - 1, 0, -1):
            branch += [f"i{d} = rem % s{d}", f"rem = rem // s{d}"]
        branch.append(f"i0 = {'rem' if dims > 1 else index}")
        for k in range(len(body.inputs)):
            if body.per_col_inputs[k]:
                continue
            along = "" if body.kind == "pointwise" or body.per_row_inputs[k] else f" + c * cst{k}"
            branch.append(f"off{k} = " + " + ".join(f"i{d} * st{k}_{d}" for d in range(dims)) + along)
        keyword = "if" if dims == 1 else "elif" if dims < rank else "else"
        lines += [f"{keyword} DIMS == {dims}:" if keyword != "else" else "else:", *(f"    {x}" for x in branch)]
    return lines


def _tile(body: Body, pid: str) -> list[str]:
    """Which elements a program computes: BLOCK of the flat index, ROWS whole rows, or (planes) a
    [ROWS, BLOCK] tile: one block of columns of ROWS rows, so the index needs no per-element division."""
    if body.kind == "pointwise":
        return [f"offs = {pid} * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
    if body.kind == "rows":
        head, first_row, first_col = [], f"{pid} * ROWS", ""
    else:
        head = [f"pid = {pid}", "col_blocks = tl.cdiv(cols, BLOCK)"]
        first_row, first_col = "pid // col_blocks * ROWS", "pid % col_blocks * BLOCK + "
    return [
        *head,
        f"r = {first_row} + tl.arange(0, ROWS)[:, None]",
        f"c = {first_col}tl.arange(0, BLOCK)[None, :]",
        "rmask = r < n_rows",
        "cmask = c < cols",
        "mask = rmask & cmask",
    ]


def kernel_source(body: Body, graph: Graph) -> str:
    """The @triton.jit kernel computing `body`: a flat grid for pointwise, ROWS rows of a [ROWS, BLOCK] tile
    per program otherwise (all of each row for rows, a block of its columns for planes)."""
    rank, inputs, outputs = _rank(body), range(len(body.inputs)), range(len(body.outputs))
    rows = body.kind != "pointwise"
    params = [f"in{k}" for k in inputs] + [f"out{j}" for j in outputs]
    params += ["n_rows", "cols"] if rows else ["n"]
    params += [f"s{d}" for d in range(rank)] + [f"st{k}_{d}" for k in inputs for d in range(rank)]
    params += [f"cst{k}" for k in inputs] if rows else []
    pid = "tl.program_id(0).to(tl.int64)" if _needs_int64(body, graph) else "tl.program_id(0)"
    lines = [*_tile(body, pid), *_offsets("r" if rows else "offs", rank, body), *body.lines]
    for j, (var, _, per_row) in enumerate(body.outputs):
        where, mask = ("r", "rmask") if per_row else ("r * cols + c", "mask") if rows else ("offs", "mask")
        lines.append(f"tl.store(out{j} + {where}, {var}.to(out{j}.dtype.element_ty), mask={mask})")
    constexprs = ["BLOCK: tl.constexpr", "ROWS: tl.constexpr", "DIMS: tl.constexpr"]
    signature = ", ".join([*params, *constexprs])
    return "@triton.jit\ndef fused_kernel(" + signature + "):\n" + "\n".join("    " + line for line in lines)


def source_of(value) -> str:
    """Python source for one argument of a graph call, as the reference wrote it."""
    if isinstance(value, Ref):
        return value.name if value.index is None else f"{value.name}[{value.index}]"
    if isinstance(value, list):
        return "[" + ", ".join(source_of(v) for v in value) + "]"
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float('{value}')"
    return repr(value)


def _call_line(node: Node) -> str:
    args = [source_of(a) for a in node.args] + [f"{k}={source_of(v)}" for k, v in (node.kwargs or {}).items()]
    if (node.op, node.overload) == ("view", "default") and len(args) == 2:
        # The same view through the Tensor method, which skips the OpOverload's Python dispatch
        # (2.0 against 3.5 us a call on the CI machine): a batch norm's forward makes four, and its
        # host time is what a 30 us kernel's measured time includes once the GPU catches up.
        return f"{node.name} = {args[0]}.view({args[1]})"
    return f"{node.name} = torch.ops.aten.{node.op}.{node.overload}({', '.join(args)})"


def host_lines(graph: Graph, needed: list[Ref]) -> list[str]:
    """The input views the kernel reads, taken in forward in the graph's order (views only, no compute)."""
    wanted: set[str] = set()
    stack = [r.name for r in needed]
    while stack:
        name = stack.pop()
        node = graph.nodes[name]
        if name in wanted or node.op == "input":
            continue
        wanted.add(name)
        stack += [a.name for a in node.args if isinstance(a, Ref)]
    return [_call_line(n) for n in graph.nodes.values() if n.name in wanted]


def render_fused(body: Body, graph: Graph, values: dict, model: str) -> str:
    """The candidate module for a pointwise, row or plane kernel at one point of its family's space. A plane
    kernel's tile is BLOCK elements; its launch splits them between rows and columns once it knows the
    columns' length (the trailing dimensions that run contiguously in every input)."""
    rows = body.kind == "rows"
    cols = body.shape[-1] if body.shape else 1
    block = triton_next_power_of_2(cols) if rows else values["block"]
    tile_rows = max(1, values["tile"] // block) if rows else 1
    warps = (
        values["num_warps"] if not rows else max(1, min(16, tile_rows * block // (32 * values["elements_per_thread"])))
    )
    text = (TEMPLATES_DIR / "fused.py.tmpl").read_text()
    return Template(text).substitute(
        shape=list(body.shape),
        outputs="[" + ", ".join(f"({dtype}, {per_row})" for _, dtype, per_row in body.outputs) + "]",
        layout=repr(body.kind),
        col_dims=body.col_dims,
        rank=_rank(body),
        block=block,
        rows=tile_rows,
        num_warps=1 << (warps.bit_length() - 1),
        kernel=kernel_source(body, graph),
        model=model,
    )


def triton_next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def model_source(init: str, forward_args: list[str], prologue: list[str], launch_args: list[str]) -> str:
    """ModelNew: the reference's constructor (`init` is its body), a forward that takes the input
    views and hands every tensor to one launch."""
    body = "\n".join(f"        {line}" for line in [*prologue, f"return launch({', '.join(launch_args)})"])
    return f"class ModelNew(nn.Module):\n{init}\n\n    def forward(self, {', '.join(forward_args)}):\n{body}\n"
