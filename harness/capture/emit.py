"""Write a captured call group as a task folder: a KernelBench-format reference.py that makes
exactly that ATen call, and the task.yaml that says what the file cannot."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import torch
import yaml

from harness.capture import costs, inputs
from harness.capture.fusion import FusedGroup
from harness.capture.record import CallGroup, TensorSpec, ValueRange
from harness.errors import ForgeBenchError
from harness.evaluate.checks import is_allowed

_REFERENCE = '''"""{doc}"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """{what}"""

    def __init__(self):
        super().__init__()

    def forward(self, {params}):
        {body}


{draw_source}

def get_inputs():
    return [
{input_lines}
    ]


def get_init_inputs():
    return []
'''


def task_id(model: str, group: CallGroup) -> str:
    """Model, op, first output's shape and a digest of the whole signature: stable across captures."""
    shape = "x".join(map(str, group.outputs[0].shape)) if group.outputs and group.outputs[0].shape else "scalar"
    return f"{model}_{group.op.overloadpacket.__name__.strip('_')}_{shape}_{group.digest}"


def _number(value: float) -> str:
    if math.isfinite(value):
        return repr(float(value))
    return f"float('{value}')"


def literal(value: Any, names: list[str]) -> str:
    """Python source for a frozen argument; each TensorSpec takes the next of `names`."""
    if isinstance(value, TensorSpec):
        return names.pop(0)
    if isinstance(value, tuple):
        return "[" + ", ".join(literal(v, names) for v in value) + "]"
    if isinstance(value, float):
        return _number(value)
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, torch.device):
        # The inputs carry the device: a reference captured on cuda:0 (or on meta) runs where they are.
        return "x0.device"
    raise ForgeBenchError(f"an argument of type {type(value).__name__} cannot be written into a reference.py")


def _call_source(group: CallGroup, names: list[str]) -> str:
    """The call with each tensor argument named, in the order of group.inputs."""
    pending = list(names)
    parts = [literal(a, pending) for a in group.args] + [f"{k}={literal(v, pending)}" for k, v in group.kwargs]
    op = group.op
    return f"torch.ops.aten.{op.overloadpacket.__name__}.{op._overloadname}({', '.join(parts)})"


def _returned(group: CallGroup, result: str) -> str:
    """What forward returns of a call whose result is the expression `result`."""
    if group.output_kind == "tensor":
        return result
    if group.output_kind == "list":
        return f"tuple({result})"
    return ", ".join(f"{result}[{group.output_slots[i]}]" for i in costs.returned(group))


def _body(group: CallGroup, names: list[str]) -> str:
    call = _call_source(group, names)
    if group.output_kind in ("tensor", "list"):
        return f"return {_returned(group, call)}"
    return f"out = {call}\n        return {_returned(group, 'out')}"


def _statistic(value: float) -> str:
    """A captured value statistic, short: exact when whole (index bounds), else 6 significant digits."""
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return f"{value:.6g}"


def _input_line(spec: TensorSpec, values: ValueRange) -> str:
    args = [str(list(spec.shape)), str(spec.dtype)]
    args += [f"low={_statistic(values.low)}", f"high={_statistic(values.high)}"]
    args += [f"mean={_statistic(values.mean)}", f"std={_statistic(values.std)}"]
    if not spec.contiguous:
        args.append(f"stride={list(spec.stride)}")
    return f"        draw({', '.join(args)}),"


def _source(doc: str, what: str, params: list[str], body: str, specs, values) -> str:
    return _REFERENCE.format(
        doc=doc,
        what=what,
        params=", ".join(params),
        body=body,
        draw_source=inspect.getsource(inputs.draw),
        input_lines="\n".join(_input_line(s, v) for s, v in zip(specs, values)),
    )


def reference_source(model: str, group: CallGroup) -> str:
    names = [f"x{i}" for i in range(len(group.inputs))]
    doc = f"{group.name} from {model} at its captured shapes: {costs.describe_shapes(group.inputs)}."
    what = f"{group.op} exactly as {model} calls it ({group.count} calls with these arguments)."
    return _source(doc, what, names, _body(group, names), group.inputs, group.values)


def _wire_name(wire, members: list[CallGroup]) -> str:
    if isinstance(wire, tuple):
        return f"x{wire[1]}"
    producer = members[wire.member]
    name = (
        f"t{wire.member}" if producer.output_kind == "tensor" else f"t{wire.member}[{producer.output_slots[wire.slot]}]"
    )
    if wire.view is None:
        return name
    shape, stride, offset = wire.view
    return f"torch.ops.aten.as_strided.default({name}, {list(shape)}, {list(stride)}, {offset})"


def _result_name(fused: FusedGroup, member: int, slot: int | None) -> str:
    """One of the task's outputs: a member's result as its op returns it, or one of its tensors."""
    group = fused.members[member]
    if slot is None:
        return _returned(group, f"t{member}")
    return f"t{member}" if group.output_kind == "tensor" else f"t{member}[{group.output_slots[slot]}]"


def returned_specs(fused: FusedGroup) -> list[TensorSpec]:
    """The tensors the fused task returns, in order."""
    specs: list[TensorSpec] = []
    for member, slot in fused.results:
        group = fused.members[member]
        specs += costs.returned_outputs(group) if slot is None else [group.outputs[slot]]
    return specs


def _returns_sentence(fused: FusedGroup) -> str:
    if not fused.outputs:
        return "It returns the region's last result only."
    return (
        f"It returns {len(fused.results)} results in call order: its own, and the intermediates the model "
        "reads outside the region too (a residual sum that feeds both a norm and the residual stream)."
    )


def fused_reference_source(model: str, fused: FusedGroup) -> str:
    """The region's calls in order, each result named t<i>, returning what its last call returns, or
    (a multi-output region) a tuple of its outputs in call order."""
    lines = [
        f"t{i} = {_call_source(member, [_wire_name(w, fused.members) for w in wires])}"
        for i, (member, wires) in enumerate(zip(fused.members, fused.wiring))
    ]
    lines.append(f"return {', '.join(_result_name(fused, m, slot) for m, slot in fused.results)}")
    ops = " -> ".join(fused.ops)
    doc = (
        f"A fused region of {model}: {ops}, at its captured shapes ({costs.describe_shapes(fused.externals)}). "
        + _returns_sentence(fused)
    )
    what = f"{len(fused.members)} calls {model} makes in a row, each reading an earlier one's result."
    names = [f"x{i}" for i in range(len(fused.externals))]
    return _source(doc, what, names, "\n        ".join(lines), fused.externals, fused.values)


def timing_tag(device: str) -> str:
    """timed-cuda / timed-cpu, or estimated-meta where shares come from the roofline, not a clock."""
    return "estimated-meta" if device == "meta" else f"timed-{device}"


def task_fields(model: str, group: CallGroup, share: float, device: str) -> tuple[dict, dict[str, str]]:
    """task.yaml's fields, and a comment per field where a figure needs its formula beside it."""
    flops, formula = costs.flops(group)
    fields = {
        "id": task_id(model, group),
        "source": model,
        "operator": group.name,
        "description": f"{group.op} as {model} calls it, {group.count} times per forward, "
        f"{share:.1%} of its {device} time; inputs {costs.describe_shapes(group.inputs)}.",
        "shapes": [list(s.shape) for s in group.inputs],
        "dtypes": [str(s.dtype).removeprefix("torch.") for s in group.inputs],
        "time_share": round(share, 6),
        "call_count": group.count,
        "bytes_moved": costs.bytes_moved(group),
        "flops": flops,
        "fused": False,
        "tags": ["captured", costs.category(group), timing_tag(device)],
    }
    comments = {
        "bytes_moved": "inputs read once (broadcasts by stride reach, gathered tables by rows taken) "
        "+ returned outputs written once",
        "flops": formula,
        "time_share": "count x replay time / sum over every timed call group of the forward",
    }
    return fields, comments


def _yaml_lines(fields: dict, comments: dict[str, str]) -> str:
    """Block YAML with flow-style lists, and each comment on its field's line."""
    text = yaml.safe_dump(fields, default_flow_style=None, width=10_000, sort_keys=False)
    lines = []
    for line in text.splitlines():
        key = line.split(":", 1)[0]
        lines.append(f"{line}  # {comments[key]}" if key in comments else line)
    return "\n".join(lines) + "\n"


def write_task(root: Path, model: str, group: CallGroup, share: float, device: str) -> str:
    """Write root/<task id>/{task.yaml, reference.py}; returns the task id."""
    fields, comments = task_fields(model, group, share, device)
    source = reference_source(model, group)  # before the folder exists: an unwritable call leaves none
    return _write(root, fields, comments, source)


def fused_task_id(model: str, fused: FusedGroup) -> str:
    """Model, first and last op, the region's length, its result's shape and a digest of it all."""
    out = fused.last.outputs[0] if fused.last.outputs else None
    shape = "x".join(map(str, out.shape)) if out is not None and out.shape else "scalar"
    first, last = (op.strip("_") for op in (fused.ops[0], fused.ops[-1]))
    return f"{model}_fused{len(fused.members)}_{first}_{last}_{shape}_{fused.digest}"


def fused_operator(fused: FusedGroup) -> str:
    """The compute ops in first-call order, as a trace of the reference names them."""
    ops = list(dict.fromkeys(op for op in fused.ops if not is_allowed(op)))
    return f"aten.{ops[0]}" if len(ops) == 1 else "+".join(ops)


def fused_task_fields(model: str, fused: FusedGroup, share: float, device: str) -> tuple[dict, dict[str, str]]:
    written = sum(o.bytes_written for o in returned_specs(fused))
    kinds = [costs.category(m) for m in fused.members]
    if "reduction" in kinds and "rsqrt" in fused.ops:
        kinds.append("norm")  # a norm written as torch ops: mean of squares or variance, then rsqrt
    kind = (
        "epilogue"
        if kinds[0] in ("matmul", "convolution")
        else next((k for k in ("norm", "softmax", "reduction") if k in kinds), "elementwise")
    )
    fields = {
        "id": fused_task_id(model, fused),
        "source": model,
        "operator": fused_operator(fused),
        "description": f"{len(fused.members)} calls {model} makes in a row ({' -> '.join(fused.ops)}), "
        f"{fused.count} times per forward, {share:.1%} of its {device} time unfused; inputs "
        f"{costs.describe_shapes(fused.externals)}; {_returns_phrase(fused)}.",
        "shapes": [list(s.shape) for s in fused.externals],
        "dtypes": [str(s.dtype).removeprefix("torch.") for s in fused.externals],
        "time_share": round(share, 6),
        "call_count": fused.count,
        "bytes_moved": sum(s.bytes_read for s in fused.externals) + written,
        "flops": sum(costs.flops(m)[0] for m in fused.members),
        "fused": True,
        "members": [str(m.op) for m in fused.members],
        "tags": ["captured", "fused", kind, *(["multi-output"] if fused.outputs else []), timing_tag(device)],
    }
    comments = {
        "bytes_moved": "region inputs read once + its result written once (intermediates stay on chip)"
        if not fused.outputs
        else "region inputs read once + each returned result written once (the other intermediates stay on chip)",
        "flops": "sum over the member calls (see each op's formula in a single-call task)",
        "time_share": "count x the members' summed replay times / sum over every timed call group",
    }
    return fields, comments


def _returns_phrase(fused: FusedGroup) -> str:
    if not fused.outputs:
        return "returns the last call's result only"
    shapes = costs.describe_shapes(returned_specs(fused))
    return f"returns {len(fused.results)} results ({shapes}): its own and the intermediates the model reads elsewhere"


def _write(root: Path, fields: dict, comments: dict[str, str], source: str) -> str:
    folder = root / fields["id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(source)
    (folder / "task.yaml").write_text(_yaml_lines(fields, comments))
    return fields["id"]


def write_fused_task(root: Path, model: str, fused: FusedGroup, share: float, device: str) -> str:
    fields, comments = fused_task_fields(model, fused, share, device)
    source = fused_reference_source(model, fused)  # first, as above
    return _write(root, fields, comments, source)
