"""Triton expressions for aten's pointwise ops, and the sets of ops the lowering knows by kind.

Each function takes the operands' Triton source and returns the expression's; the fused kernel's
template defines `_tanh`, `_expm1` and `_round_bf16`, which the expressions may call.
"""

from __future__ import annotations

import math

import torch

TL_DTYPES = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16"}
REDUCTIONS = {"sum", "mean", "amax", "amin", "var", "logsumexp"}
NORMS = {"_softmax", "_log_softmax", "softmax", "log_softmax", "native_layer_norm", "rms_norm", "_fused_rms_norm"}
# Prefix scans along the last dimension: a row kernel holds the whole row, so one tl.cumsum serves.
SCANS = {"cumsum": ("tl.cumsum", "0.0"), "cumprod": ("tl.cumprod", "1.0")}
BATCH_NORMS = {"native_batch_norm", "_native_batch_norm_legit_no_training", "cudnn_batch_norm"}
IDENTITY = {"clone", "alias", "detach", "lift_fresh_copy", "contiguous", "_to_copy", "to", "_copy_from"}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _tanh(a: str) -> str:
    return f"_tanh({a})"


UNARY = {
    "neg": lambda a: f"-{a}",
    "exp": lambda a: f"tl.exp({a})",
    "exp2": lambda a: f"tl.exp2({a})",
    "log": lambda a: f"tl.log({a})",
    "log2": lambda a: f"tl.log2({a})",
    "sqrt": lambda a: f"tl.sqrt({a})",
    "rsqrt": lambda a: f"tl.rsqrt({a})",
    "abs": lambda a: f"tl.abs({a})",
    "reciprocal": lambda a: f"(1.0 / {a})",
    "sin": lambda a: f"tl.sin({a})",
    "cos": lambda a: f"tl.cos({a})",
    "erf": lambda a: f"tl.erf({a})",
    "sigmoid": lambda a: f"tl.sigmoid({a})",
    "tanh": _tanh,
    "relu": lambda a: f"tl.maximum({a}, 0.0)",
    "hardsigmoid": lambda a: f"(tl.minimum(tl.maximum({a} + 3.0, 0.0), 6.0) / 6.0)",
    "silu": lambda a: f"({a} * tl.sigmoid({a}))",
    "logical_not": lambda a: f"({a} == 0)",
}


def elu_args(arg) -> tuple[float, float, float]:
    """aten.elu's (scale, input_scale, alpha * scale): elu(x) = scale * x above zero,
    alpha * scale * (exp(input_scale * x) - 1) below."""
    alpha, scale, input_scale = (
        float(arg(i, name, 1.0)) for i, name in ((1, "alpha"), (2, "scale"), (3, "input_scale"))
    )
    return scale, input_scale, alpha * scale


def gelu(a: str, approximate: str = "none") -> str:
    if approximate == "tanh":
        return f"(0.5 * {a} * (1.0 + _tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a}))))"
    return f"(0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476)))"


def power(a: str, exponent: float) -> str:
    if exponent == 0.5:
        return f"tl.sqrt({a})"
    if exponent == -0.5:
        return f"tl.rsqrt({a})"
    if float(exponent).is_integer() and abs(exponent) <= 8:
        n = int(abs(exponent))
        product = " * ".join([a] * n) if n else "1.0"
        return f"(1.0 / ({product}))" if exponent < 0 else f"({product})"
    return f"tl.exp2({number(exponent)} * tl.log2({a}))"


def number(value) -> str:
    if isinstance(value, bool):
        return "1.0" if value else "0.0"
    if not math.isfinite(value):
        return f'float("{value}")'
    return repr(float(value))
