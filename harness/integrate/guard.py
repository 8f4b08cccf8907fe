"""The guard: which kernels go into the model, decided by evidence from the model itself.

For each kernel: the real activations of every call at its task's signature are recorded in one
forward with the workload's inputs; the kernel is checked on each against the op's own output with
the task's tolerance, then timed against the op on them. It is kept only when it is right on every
recorded call and faster in place than the op by more than the timing spread (its 80th percentile
below the op's 20th). Each decision says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

from harness.capture.record import functional
from harness.evaluate import timing
from harness.evaluate.checks import compare
from harness.integrate.graph_patch import Kernel, kernel_inputs
from harness.integrate.signature import of_call

# Recorded calls per signature: a layer repeated 40 times is checked on its first eight.
_MAX_RECORDED = 8


@dataclass
class Decision:
    task_id: str
    decision: str  # kept | incorrect_in_model | slower_in_place | never_called | not_integrable | failed_to_load
    reason: str = ""
    calls_checked: int = 0
    op_ms: float | None = None
    kernel_ms: float | None = None
    in_place_speedup: float | None = None
    figures: dict = field(default_factory=dict)

    @property
    def kept(self) -> bool:
        return self.decision == "kept"


class _Activations(TorchDispatchMode):
    """Copies of the arguments and the op's own output of every call at a kernel's signature."""

    def __init__(self, kernels: list[Kernel]):
        super().__init__()
        self.by_signature = {k.call.signature: k.task_id for k in kernels}
        self.ops = {k.call.op for k in kernels}
        self.calls: dict[str, list[tuple[tuple, Any]]] = {k.task_id: [] for k in kernels}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        # An in-place call (ResNet's `out += identity`) is its out-of-place twin in the task, and in
        # the traced graph the interposer patches; its arguments are copied before it writes them.
        twin = functional(func) if func._schema.is_mutable else func
        task_id = self.by_signature.get(of_call(twin, args, kwargs)) if twin in self.ops else None
        wanted = task_id is not None and len(self.calls[task_id]) < _MAX_RECORDED
        copy = tree_unflatten(*_cloned(args)) if wanted else None
        out = func(*args, **kwargs)
        if wanted:
            self.calls[task_id].append((copy, tree_unflatten(*_cloned(out))))
        return out


def _cloned(value: Any) -> tuple[list, Any]:
    leaves, spec = tree_flatten(value)
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in leaves], spec


def record(run, kernels: list[Kernel]) -> dict[str, list[tuple[tuple, Any]]]:
    recorder = _Activations(kernels)
    with torch.no_grad(), recorder:
        run()
    return recorder.calls


def _op_on(kernel: Kernel, args: tuple):
    """The op as the model calls it, taking the kernel's inputs (so both are timed on the same ones)."""
    leaves, spec = tree_flatten(list(args))
    tensor_at = [i for i, t in enumerate(leaves) if isinstance(t, torch.Tensor)]

    def op(*inputs):
        filled = list(leaves)
        for slot, position in zip(tensor_at, kernel.call.input_positions):
            filled[slot] = inputs[position]
        return kernel.call.op(*tree_unflatten(filled, spec))

    return op


def decide(kernel: Kernel, calls: list[tuple[tuple, Any]], tolerance: dict, device, budget_ms: float) -> Decision:
    if not calls:
        return Decision(
            kernel.task_id, "never_called", "the model made no call at the signature its task was captured at"
        )
    for i, (args, expected) in enumerate(calls):
        outs, _ = tree_flatten(expected)
        try:
            got = kernel.module(*kernel_inputs(kernel, args))
        except Exception as exc:
            reason = f"it raised on the model's call {i + 1}: {type(exc).__name__}: {exc}"[:400]
            return Decision(kernel.task_id, "incorrect_in_model", reason, i + 1)
        mismatch = compare(outs[kernel.call.output_index], got, tolerance)
        if mismatch:
            reason = f"wrong on the model's own activations (call {i + 1} of {len(calls)}): {mismatch.reason}"
            return Decision(kernel.task_id, "incorrect_in_model", reason[:600], i + 1)
    args = calls[0][0]
    inputs = kernel_inputs(kernel, args)
    # No GPU lead: in the model a kernel's host time is paid too (the whole model is timed alike).
    settings = {"budget_ms": budget_ms, "warmup_ms": budget_ms / 5, "gpu_lead": False}
    op_t = timing.measure(_op_on(kernel, args), [inputs], device, **settings)
    kernel_t = timing.measure(kernel.module, [inputs], device, **settings)
    decision = Decision(
        kernel.task_id,
        "kept",
        calls_checked=len(calls),
        op_ms=op_t.median_ms,
        kernel_ms=kernel_t.median_ms,
        in_place_speedup=op_t.median_ms / kernel_t.median_ms,
        figures={
            "op_p20_ms": op_t.p20_ms,
            "op_p80_ms": op_t.p80_ms,
            "kernel_p20_ms": kernel_t.p20_ms,
            "kernel_p80_ms": kernel_t.p80_ms,
        },
    )
    if not kernel_t.p80_ms < op_t.p20_ms:
        decision.decision = "slower_in_place"
        decision.reason = (
            f"in place it takes {kernel_t.median_ms:.4g} ms (p80 {kernel_t.p80_ms:.4g}) against the op's "
            f"{op_t.median_ms:.4g} ms (p20 {op_t.p20_ms:.4g}): not faster by more than the timing spread"
        )
    return decision
