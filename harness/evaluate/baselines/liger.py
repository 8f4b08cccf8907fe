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
from torch.utils._python_dispatch import TorchDispatchMode

from harness.evaluate.baselines import Baseline, NotApplicable, Sample
from harness.evaluate.checks import is_allowed

Getter = Callable[[list[Any]], Any]
_RMS_CHAIN = frozenset({"pow", "mean", "add", "rsqrt", "mul", "div", "sqrt", "reciprocal"})


class _Trace(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple, dict]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((func.overloadpacket.__name__, args, kwargs))
        return func(*args, **kwargs)


def _compute_calls(sample: Sample) -> list[tuple[str, tuple, dict]]:
    with _Trace() as trace:
        sample.model(*sample.inputs)
    return [c for c in trace.calls if not is_allowed(c[0])]


def _source(t: torch.Tensor, sample: Sample) -> Getter:
    """How to find tensor t from a call's inputs: an input or a view of one, or a model parameter."""
    for i, x in enumerate(sample.inputs):
        if not isinstance(x, torch.Tensor):
            continue
        if t is x:
            return lambda inputs, i=i: inputs[i]
        if t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
            shift = t.storage_offset() - x.storage_offset()
            shape, stride = tuple(t.shape), tuple(t.stride())
            return lambda inputs, i=i: inputs[i].as_strided(shape, stride, inputs[i].storage_offset() + shift)
    held = [*sample.model.parameters(), *sample.model.buffers()]
    if any(t is p or (t.data_ptr() == p.data_ptr() and t.shape == p.shape) for p in held):
        return lambda inputs: t
    raise NotApplicable("an operand of its op is computed inside the reference, not an input or a parameter")


def _optional(t: Any, sample: Sample) -> Getter:
    return (lambda inputs: None) if t is None else _source(t, sample)


def _arg(call: tuple[str, tuple, dict], index: int, name: str, default: Any = None) -> Any:
    _, args, kwargs = call
    return args[index] if len(args) > index else kwargs.get(name, default)


def _rms_norm(calls, sample: Sample) -> list[Callable[..., Any]]:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    names = [c[0] for c in calls]
    fused = [c for c in calls if c[0] in ("rms_norm", "_fused_rms_norm")]
    if fused:
        x, weight = _source(fused[0][1][0], sample), _optional(_arg(fused[0], 2, "weight"), sample)
        eps = _arg(fused[0], 3, "eps")
        eps = torch.finfo(fused[0][1][0].dtype).eps if eps is None else float(eps)
    else:
        x = next((_source(t, sample) for t in sample.inputs if isinstance(t, torch.Tensor) and t.dim() >= 2), None)
        scalars = [a for name, args, _ in calls if name == "add" for a in args if isinstance(a, (int, float))]
        if x is None or not scalars:
            raise NotApplicable("its RMSNorm-like chain has no 2-D input or no epsilon")
        eps = float(scalars[0])
        hidden = next(t for t in sample.inputs if isinstance(t, torch.Tensor) and t.dim() >= 2).shape[-1]
        held = [p for p in (*sample.model.parameters(), *sample.model.buffers()) if p.shape == (hidden,)]
        inputs_1d = [t for t in sample.inputs if isinstance(t, torch.Tensor) and t.shape == (hidden,)]
        weights = held or inputs_1d
        weight = _source(weights[0], sample) if len(weights) == 1 and "mul" in names else (lambda inputs: None)
    return [
        lambda *inputs, mode=mode: LigerRMSNormFunction.apply(x(inputs), weight(inputs), eps, 0.0, mode)
        for mode in ("llama", "gemma", "none")
    ]


def _layer_norm(call, sample: Sample) -> list[Callable[..., Any]]:
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction

    x = _source(call[1][0], sample)
    if len(_arg(call, 1, "normalized_shape")) != 1:
        raise NotApplicable("Liger's LayerNorm normalises over the last dimension only")
    hidden = call[1][0].shape[-1]
    weight, bias = _optional(_arg(call, 2, "weight"), sample), _optional(_arg(call, 3, "bias"), sample)
    eps = float(_arg(call, 4, "eps", 1e-5))

    def run(*inputs):
        t = x(inputs)
        w = weight(inputs) if weight(inputs) is not None else torch.ones(hidden, dtype=t.dtype, device=t.device)
        b = bias(inputs) if bias(inputs) is not None else torch.zeros(hidden, dtype=t.dtype, device=t.device)
        return LigerLayerNormFunction.apply(t, w, b, eps)

    return [run]


def _group_norm(call, sample: Sample) -> list[Callable[..., Any]]:
    from liger_kernel.ops.group_norm import LigerGroupNormFunction

    x = _source(call[1][0], sample)
    weight, bias = _optional(_arg(call, 1, "weight"), sample), _optional(_arg(call, 2, "bias"), sample)
    channels, groups, eps = int(_arg(call, 4, "C")), int(_arg(call, 6, "group")), float(_arg(call, 7, "eps"))
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
    source = call[1][0]
    if int(_arg(call, 1, "dim")) % source.dim() != source.dim() - 1 or _arg(call, 2, "half_to_float"):
        raise NotApplicable("Liger's softmax works over the last dimension, in the input's dtype")
    x = _source(source, sample)
    return [lambda *inputs: LigerSoftmaxFunction.apply(x(inputs))]


def _gated(calls, sample: Sample) -> list[Callable[..., Any]]:
    activation, product = calls
    a = _source(activation[1][0], sample)
    ups = []
    for operand in (t for t in product[1] if isinstance(t, torch.Tensor)):
        try:
            ups.append(_source(operand, sample))
        except NotApplicable:
            pass  # the activation's own output
    if len(ups) != 1:
        raise NotApplicable("its gate and up operands could not be told apart")
    b = ups[0]
    if activation[0] == "silu":
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction

        return [lambda *inputs: LigerSiLUMulFunction.apply(a(inputs), b(inputs))]
    if _arg(activation, 1, "approximate", "none") != "tanh":
        raise NotApplicable("Liger's GEGLU computes the tanh approximation of GELU only")
    from liger_kernel.ops.geglu import LigerGELUMulFunction

    return [lambda *inputs: LigerGELUMulFunction.apply(a(inputs), b(inputs))]


def variants(sample: Sample) -> list[Callable[..., Any]]:
    """Liger callables that may compute the reference's op, most likely first (the worker times the
    first whose output matches the reference's)."""
    calls = _compute_calls(sample)
    names = [c[0] for c in calls]
    if not calls:
        raise NotApplicable("the reference calls no compute op")
    if set(names) <= _RMS_CHAIN and {"mean", "pow"} <= set(names) and {"rsqrt", "sqrt"} & set(names):
        return _rms_norm(calls, sample)
    if len(calls) == 1:
        single = {
            "rms_norm": lambda: _rms_norm(calls, sample),
            "_fused_rms_norm": lambda: _rms_norm(calls, sample),
            "native_layer_norm": lambda: _layer_norm(calls[0], sample),
            "layer_norm": lambda: _layer_norm(calls[0], sample),
            "native_group_norm": lambda: _group_norm(calls[0], sample),
            "_softmax": lambda: _softmax(calls[0], sample),
            "softmax": lambda: _softmax(calls[0], sample),
        }
        if names[0] in single:
            return single[names[0]]()
    if names in (["silu", "mul"], ["gelu", "mul"]):
        return _gated(calls, sample)
    raise NotApplicable(f"Liger-Kernel has no kernel for this op (its ATen calls: {', '.join(names[:8])})")


BASELINE = Baseline(
    name="liger",
    description="Liger-Kernel's Triton kernel for the task's op",
    build=variants,
    needs=("liger_kernel", "triton"),
    devices=("cuda",),
)
