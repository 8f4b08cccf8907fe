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
    return Signature([s for s, _ in described if s is not None], [d for _, d in described], init_inputs, ops)
