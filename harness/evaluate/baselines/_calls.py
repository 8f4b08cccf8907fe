"""What a library baseline reads off the task's reference: the ATen calls it makes on a sample input,
which kind of op they make (an RMSNorm, a gated activation, ...), and where each operand of those
calls comes from (an input, a view of one, or a parameter), so an adapter can hand the library's
kernel the same tensors. Shared by the library adapters (liger.py,
flashinfer.py); not a baseline itself (its name starts with an underscore)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.evaluate.baselines import NotApplicable, Sample
from harness.evaluate.checks import is_allowed

Getter = Callable[[list[Any]], Any]
Call = tuple[str, tuple, dict]
# The ops an RMSNorm written out in PyTorch makes (`x * rsqrt(mean(x**2) + eps) * w`, and its casts).
RMS_CHAIN = frozenset({"pow", "mean", "add", "rsqrt", "mul", "div", "sqrt", "reciprocal"})


class _Trace(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((func.overloadpacket.__name__, args, kwargs))
        return func(*args, **kwargs)


def compute_calls(sample: Sample) -> list[Call]:
    """The reference's compute calls on the sample (views, copies and casts left out)."""
    with _Trace() as trace:
        sample.model(*sample.inputs)
    calls = [c for c in trace.calls if not is_allowed(c[0])]
    if not calls:
        raise NotApplicable("the reference calls no compute op")
    return calls


def names(calls: list[Call]) -> list[str]:
    return [c[0] for c in calls]


def is_rms_norm(calls: list[Call]) -> bool:
    found = set(names(calls))
    return found <= RMS_CHAIN and {"mean", "pow"} <= found and bool({"rsqrt", "sqrt"} & found)


def _starts_with_residual_add(calls: list[Call], sample: Sample) -> bool:
    """An add of two inputs of one shape, then an RMSNorm of the sum."""
    first = calls[0]
    operands = [t for t in first[1][:2] if isinstance(t, torch.Tensor)]
    return (
        first[0] == "add"
        and len(operands) == 2
        and operands[0].shape == operands[1].shape
        and all(any(t is x for _, x in tensor_inputs(sample)) for t in operands)
        and len(calls) > 1
        and is_rms_norm(calls[1:])
    )


_SINGLE = {
    "rms_norm": "rms_norm",
    "_fused_rms_norm": "rms_norm",
    "native_layer_norm": "layer_norm",
    "layer_norm": "layer_norm",
    "native_group_norm": "group_norm",
    "_softmax": "softmax",
    "softmax": "softmax",
}


def kind_of(calls: list[Call], sample: Sample) -> str | None:
    """Which op the calls make, as the library adapters name them: residual_rms_norm, rms_norm,
    layer_norm, group_norm, softmax, gated (an activation times another input), or None."""
    ops = names(calls)
    if _starts_with_residual_add(calls, sample):
        return "residual_rms_norm"
    if is_rms_norm(calls):
        return "rms_norm"
    if len(calls) == 1:
        return _SINGLE.get(ops[0])
    return "gated" if ops in (["silu", "mul"], ["gelu", "mul"]) else None


Builder = Callable[[list[Call], Sample], list[Callable[..., Any]]]


def library_variants(library: str, builders: dict[str, Builder], sample: Sample) -> list[Callable[..., Any]]:
    """The library's callables for the task's op, most likely first (the reference worker times the
    first whose output matches the reference's), from the builder for its kind."""
    calls = compute_calls(sample)
    kind = kind_of(calls, sample)
    if kind not in builders:
        raise NotApplicable(f"{library} has no kernel for this op (its ATen calls: {', '.join(names(calls)[:8])})")
    return builders[kind](calls, sample)


def source(t: torch.Tensor, sample: Sample) -> Getter:
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


def reads_input(t: torch.Tensor, sample: Sample) -> bool:
    """Whether t is one of the task's inputs or a view of one (not a parameter, not a result)."""
    storage = t.untyped_storage().data_ptr()
    return any(storage == x.untyped_storage().data_ptr() for _, x in tensor_inputs(sample))


def gated(calls: list[Call], sample: Sample) -> tuple[str, torch.Tensor, torch.Tensor]:
    """Of a gated activation (`act(gate) * up`): the activation (silu, gelu_tanh or gelu), gate and
    up, up being the product's operand that is an input or a parameter (not the activation's result)."""
    activation, product = calls
    ups = []
    for operand in (t for t in product[1] if isinstance(t, torch.Tensor)):
        try:
            source(operand, sample)
            ups.append(operand)
        except NotApplicable:
            pass  # the activation's own output
    if len(ups) != 1:
        raise NotApplicable("its gate and up operands could not be told apart")
    if activation[0] == "silu":
        name = "silu"
    else:
        name = "gelu_tanh" if arg(activation, 1, "approximate", "none") == "tanh" else "gelu"
    return name, activation[1][0], ups[0]


def optional(t: Any, sample: Sample) -> Getter:
    return (lambda inputs: None) if t is None else source(t, sample)


def arg(call: Call, index: int, name: str, default: Any = None) -> Any:
    _, args, kwargs = call
    return args[index] if len(args) > index else kwargs.get(name, default)


def tensor_inputs(sample: Sample) -> list[tuple[int, torch.Tensor]]:
    return [(i, t) for i, t in enumerate(sample.inputs) if isinstance(t, torch.Tensor)]


def rms_norm_operands(calls: list[Call], sample: Sample) -> tuple[int, list[int], list[Getter], float]:
    """For an RMSNorm written out as a chain: the hidden size, the inputs that may be the normalised
    tensor (every input of two or more dimensions), the weights it may be multiplied by (a parameter
    or a 1-D input of the hidden size, or none) and its epsilon (the first scalar added)."""
    scalars = [a for name, args, _ in calls if name == "add" for a in args if isinstance(a, (int, float))]
    big = [i for i, t in tensor_inputs(sample) if t.dim() >= 2]
    if not big or not scalars:
        raise NotApplicable("its RMSNorm-like chain has no input of two or more dimensions, or no epsilon")
    hidden = sample.inputs[big[0]].shape[-1]
    held = [p for p in (*sample.model.parameters(), *sample.model.buffers()) if p.shape == (hidden,)]
    one_d = [t for _, t in tensor_inputs(sample) if t.shape == (hidden,)]
    weights = [source(w, sample) for w in (held or one_d)] if "mul" in names(calls) else []
    return hidden, big, weights, float(scalars[0])
