"""Liger-Kernel (Triton kernels from LinkedIn) where it has the task's op: RMSNorm, LayerNorm,
GroupNorm, softmax, SiLU-and-mul (SwiGLU) and GELU-and-mul (GEGLU).

The op is read from the ATen calls the reference makes on a sample input, so a handwritten module,
a captured ATen op and a captured chain (`_to_copy, pow, mean, add, rsqrt, mul, ...`) all match;
the reference worker then checks Liger's output against the reference's before timing it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from harness.evaluate.baselines import Baseline, NotApplicable, Sample
from harness.evaluate.baselines._calls import (
    arg,
    gated,
    library_variants,
    optional,
    rms_norm_operands,
    source,
)


def _rms_norm(calls, sample: Sample) -> list[Callable[..., Any]]:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    fused = [c for c in calls if c[0] in ("rms_norm", "_fused_rms_norm")]
    if fused:
        x, weight = source(fused[0][1][0], sample), optional(arg(fused[0], 2, "weight"), sample)
        eps = arg(fused[0], 3, "eps")
        eps = torch.finfo(fused[0][1][0].dtype).eps if eps is None else float(eps)
    else:
        _, big, weights, eps = rms_norm_operands(calls, sample)
        x = source(sample.inputs[big[0]], sample)
        weight = weights[0] if len(weights) == 1 else (lambda inputs: None)
    return [
        lambda *inputs, mode=mode: LigerRMSNormFunction.apply(x(inputs), weight(inputs), eps, 0.0, mode)
        for mode in ("llama", "gemma", "none")
    ]


def _layer_norm(call, sample: Sample) -> list[Callable[..., Any]]:
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction

    x = source(call[1][0], sample)
    if len(arg(call, 1, "normalized_shape")) != 1:
        raise NotApplicable("Liger's LayerNorm normalises over the last dimension only")
    like = call[1][0]
    weight, bias = optional(arg(call, 2, "weight"), sample), optional(arg(call, 3, "bias"), sample)
    # A LayerNorm without affine parameters gets ones and zeros, made once here and not in the timing.
    ones = torch.ones(like.shape[-1], dtype=like.dtype, device=like.device)
    zeros = torch.zeros_like(ones)
    eps = float(arg(call, 4, "eps", 1e-5))

    def run(*inputs):
        w, b = weight(inputs), bias(inputs)
        return LigerLayerNormFunction.apply(x(inputs), ones if w is None else w, zeros if b is None else b, eps)

    return [run]


def _group_norm(call, sample: Sample) -> list[Callable[..., Any]]:
    from liger_kernel.ops.group_norm import LigerGroupNormFunction

    x = source(call[1][0], sample)
    weight, bias = optional(arg(call, 1, "weight"), sample), optional(arg(call, 2, "bias"), sample)
    channels, groups, eps = int(arg(call, 4, "C")), int(arg(call, 6, "group")), float(arg(call, 7, "eps"))
    if weight(list(sample.inputs)) is None or bias(list(sample.inputs)) is None:
        raise NotApplicable("Liger's GroupNorm needs an affine weight and bias")
    return [
        lambda *inputs: LigerGroupNormFunction.apply(x(inputs), weight(inputs), bias(inputs), channels, groups, eps)
    ]


def _softmax(call, sample: Sample) -> list[Callable[..., Any]]:
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
    except ImportError as exc:
        raise NotApplicable("this liger-kernel release has no softmax") from exc
    operand = call[1][0]
    if int(arg(call, 1, "dim")) % operand.dim() != operand.dim() - 1 or arg(call, 2, "half_to_float"):
        raise NotApplicable("Liger's softmax works over the last dimension, in the input's dtype")
    x = source(operand, sample)
    return [lambda *inputs: LigerSoftmaxFunction.apply(x(inputs))]


def _gated(calls, sample: Sample) -> list[Callable[..., Any]]:
    activation, gate, up = gated(calls, sample)
    a, b = source(gate, sample), source(up, sample)
    if activation == "silu":
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction

        return [lambda *inputs: LigerSiLUMulFunction.apply(a(inputs), b(inputs))]
    if activation != "gelu_tanh":
        raise NotApplicable("Liger's GEGLU computes the tanh approximation of GELU only")
    from liger_kernel.ops.geglu import LigerGELUMulFunction

    return [lambda *inputs: LigerGELUMulFunction.apply(a(inputs), b(inputs))]


def variants(sample: Sample) -> list[Callable[..., Any]]:
    return library_variants(
        "Liger-Kernel",
        {
            "rms_norm": _rms_norm,
            "layer_norm": lambda calls, sample: _layer_norm(calls[0], sample),
            "group_norm": lambda calls, sample: _group_norm(calls[0], sample),
            "softmax": lambda calls, sample: _softmax(calls[0], sample),
            "gated": _gated,
        },
        sample,
    )


BASELINE = Baseline(
    name="liger",
    description="Liger-Kernel's Triton kernel for the task's op",
    build=variants,
    needs=("liger_kernel", "triton"),
    devices=("cuda",),
)
