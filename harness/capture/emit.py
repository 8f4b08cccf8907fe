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
from harness.capture.record import CallGroup, TensorSpec, ValueRange
from harness.errors import ForgeBenchError

_REFERENCE = '''"""{doc}"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """{op} exactly as {model} calls it ({count} calls with these arguments)."""

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
        return f"torch.device({str(value)!r})"
    raise ForgeBenchError(f"an argument of type {type(value).__name__} cannot be written into a reference.py")


def _call_source(group: CallGroup, names: list[str]) -> str:
    pending = list(names)
    parts = [literal(a, pending) for a in group.args] + [f"{k}={literal(v, pending)}" for k, v in group.kwargs]
    op = group.op
    return f"torch.ops.aten.{op.overloadpacket.__name__}.{op._overloadname}({', '.join(parts)})"


def _body(group: CallGroup, names: list[str]) -> str:
    call = _call_source(group, names)
    if group.output_kind == "tensor":
        return f"return {call}"
    if group.output_kind == "list":
        return f"return tuple({call})"
    picked = ", ".join(f"out[{group.output_slots[i]}]" for i in costs.returned(group))
    return f"out = {call}\n        return {picked}"


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


def reference_source(model: str, group: CallGroup) -> str:
    names = [f"x{i}" for i in range(len(group.inputs))]
    doc = f"{group.name} from {model} at its captured shapes: {costs.describe_shapes(group.inputs)}."
    return _REFERENCE.format(
        doc=doc,
        op=str(group.op),
        model=model,
        count=group.count,
        params=", ".join(names),
        body=_body(group, names),
        draw_source=inspect.getsource(inputs.draw),
        input_lines="\n".join(_input_line(s, v) for s, v in zip(group.inputs, group.values)),
    )


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
        "tags": ["captured", costs.category(group), f"timed-{device}"],
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
    folder = root / fields["id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(source)
    (folder / "task.yaml").write_text(_yaml_lines(fields, comments))
    return fields["id"]
