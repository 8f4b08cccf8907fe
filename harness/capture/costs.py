"""What a captured call costs at least (bytes moved, FLOPs, for the roofline) and what it returns.

Both feed the evaluator's floor check, which distrusts a kernel faster than bytes/bandwidth or
FLOPs/peak: so every figure here is a lower bound, never an estimate that could run high."""

from __future__ import annotations

import torch

from harness.capture.record import CallGroup, TensorSpec
from harness.evaluate.checks import COPIES

# Matmul-like ops: the argument whose last dimension is the reduction length K.
# FLOPs = 2 * numel(output) * K (one multiply and one add per term).
_MATMUL_K_ARG = {
    "mm": "self",
    "bmm": "self",
    "addmm": "mat1",
    "baddbmm": "batch1",
    "addbmm": "batch1",
    "linear": "input",
    "_int_mm": "self",
    "_scaled_mm": "self",
}

# Ops whose later outputs are state kept for a backward pass or RNG bookkeeping (mean/rstd,
# logsumexp, philox seeds): inference uses the first output alone, and so does the task.
_NORMS = frozenset(
    [
        "native_layer_norm",
        "native_group_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "cudnn_batch_norm",
        "miopen_batch_norm",
        "_fused_rms_norm",
    ]
)
# Query, key and value laid out (batch, heads, length, head_dim).
_ATTENTION = frozenset(
    [
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
    ]
)
FIRST_OUTPUT_ONLY = _NORMS | _ATTENTION | {"_flash_attention_forward", "_efficient_attention_forward"}

# Gathers read only the rows their indices pick from this argument: counting the whole table
# (a 2 GB embedding) would put the floor far above what the reference itself takes.
_GATHERED_ARG = {
    "embedding": "weight",
    "embedding_bag": "weight",
    "index_select": "self",
    "index": "self",
    "_unsafe_index": "self",
    "gather": "self",
    "take": "self",
}


def returned(group: CallGroup) -> list[int]:
    """Which of the group's outputs a task's reference returns (indices into group.outputs): the
    first for FIRST_OUTPUT_ONLY ops, every one for an op returning a list, else the non-empty ones."""
    if group.op.overloadpacket.__name__ in FIRST_OUTPUT_ONLY:
        return [0] if group.outputs else []
    return [i for i, o in enumerate(group.outputs) if o.numel or group.output_kind == "list"]


def returned_outputs(group: CallGroup) -> list[TensorSpec]:
    return [group.outputs[i] for i in returned(group)]


def _named_args(group: CallGroup) -> dict:
    names = [a.name for a in group.op._schema.arguments]
    return {**dict(zip(names, group.args)), **dict(group.kwargs)}


def _read_bytes(group: CallGroup) -> list[int]:
    """Bytes each input contributes: all of it once, a gathered table only as much as is written."""
    gathered = _named_args(group).get(_GATHERED_ARG.get(group.op.overloadpacket.__name__, ""))
    written = sum(o.bytes_written for o in returned_outputs(group))
    return [min(s.bytes_read, written) if s is gathered else s.bytes_read for s in group.inputs]


def bytes_moved(group: CallGroup) -> int:
    """Every input read once (a broadcast input only as far as its strides reach, a gathered table
    only as much as the gather writes) plus every returned output written once."""
    return sum(_read_bytes(group)) + sum(o.bytes_written for o in returned_outputs(group))


def flops(group: CallGroup) -> tuple[int, str]:
    """FLOPs of the call and the formula that gave them (written beside the figure in task.yaml)."""
    name = group.op.overloadpacket.__name__
    args = _named_args(group)
    out = group.outputs[0] if group.outputs else None
    if name in _MATMUL_K_ARG and out is not None:
        k = args[_MATMUL_K_ARG[name]].shape[-1]
        return 2 * out.numel * k, "2 * numel(output) * K (multiply-add per term)"
    if name == "convolution" and out is not None:
        weight, source = args["weight"], (args["input"] if args["transposed"] else out)
        per_point = weight.numel // weight.shape[0]  # (C_in/groups) * kernel area, or C_out/groups * area
        return 2 * source.numel * per_point, "2 * numel(output; input if transposed) * weight.numel / weight.shape[0]"
    if name in _ATTENTION:
        q, k, v = args["query"], args["key"], args["value"]
        causal = bool(args.get("is_causal", False))
        rows = q.numel // q.shape[-1]  # batch * heads * query length
        total = 2 * rows * k.shape[-2] * (q.shape[-1] + v.shape[-1])
        return (total // 2 if causal else total), "2 * B*H*L * S * (E + Ev), halved when causal (QK^T and PV)"
    elements = [b // s.dtype.itemsize for b, s in zip(_read_bytes(group), group.inputs)]
    largest = max([*elements, *(o.numel for o in returned_outputs(group))], default=0)
    return largest, "elements of the largest tensor read or written (about one operation per element)"


_SOFTMAX = frozenset(["_softmax", "_log_softmax", "softmax", "log_softmax"])


def category(group: CallGroup) -> str:
    """A tag for the kind of work: matmul, convolution, attention, norm, softmax, copy, elementwise,
    reduction, other."""
    name = group.op.overloadpacket.__name__
    named = {"convolution": "convolution", **dict.fromkeys(_MATMUL_K_ARG, "matmul")}
    named |= dict.fromkeys(_ATTENTION, "attention") | dict.fromkeys(_NORMS, "norm")
    named |= dict.fromkeys(_SOFTMAX, "softmax") | dict.fromkeys(COPIES, "copy")
    if name in named:
        return named[name]
    if torch.Tag.pointwise in group.op.tags:
        return "elementwise"
    return "reduction" if torch.Tag.reduction in group.op.tags else "other"


def describe_shapes(specs: list[TensorSpec]) -> str:
    return ", ".join(f"{list(s.shape)} {str(s.dtype).removeprefix('torch.')}" for s in specs) or "no tensors"


# Where nothing can be timed (a capture on meta tensors), a call's time is estimated at its
# roofline: the H200's ceilings as the evaluator measured them (docs/results.md).
ESTIMATE_CEILINGS = {"copy_gbps": 4223.0, "bf16_tflops": 714.0}


def estimated_ms(group: CallGroup) -> float:
    """max(bytes / bandwidth, FLOPs / peak): the fastest the call could run, an estimate of its time."""
    memory = bytes_moved(group) / (ESTIMATE_CEILINGS["copy_gbps"] * 1e9)
    compute = flops(group)[0] / (ESTIMATE_CEILINGS["bf16_tflops"] * 1e12)
    return 1e3 * max(memory, compute)
