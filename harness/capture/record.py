"""Record every ATen call of one forward, grouped by signature: same op, same argument shapes,
dtypes, strides and non-tensor arguments. Views are not recorded; they move no data."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.evaluate.checks import COPIES, is_allowed

# Values summarised per input come from at most this many elements: a strided sample of a
# multi-gigabyte weight describes its range as well as the whole does.
_SAMPLE = 1 << 22


@dataclass(frozen=True)
class TensorSpec:
    """What a replay needs of one tensor argument, apart from its values."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    stride: tuple[int, ...]

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorSpec:
        return cls(tuple(tensor.shape), tensor.dtype, tuple(tensor.stride()))

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def span(self) -> int:
        """Elements of the buffer the strides reach: fewer than numel for a broadcast (stride 0)."""
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride)) if self.numel else 0

    @property
    def contiguous(self) -> bool:
        expected = 1
        for n, s in reversed(list(zip(self.shape, self.stride))):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True

    @property
    def bytes_read(self) -> int:
        return min(self.numel, self.span) * self.dtype.itemsize

    @property
    def bytes_written(self) -> int:
        return self.numel * self.dtype.itemsize


@dataclass(frozen=True)
class ValueRange:
    """The values one input held at capture: enough to draw look-alike random inputs."""

    low: float
    high: float
    mean: float
    std: float

    @classmethod
    def of(cls, tensor: torch.Tensor) -> ValueRange:
        if tensor.device.type == "meta":  # no values: standard normal floats, zero indices
            if tensor.dtype == torch.bool:
                return cls(0.0, 1.0, 0.5, 0.0)
            return cls(-4.0, 4.0, 0.0, 1.0) if tensor.is_floating_point() else cls(0.0, 0.0, 0.0, 0.0)
        flat = tensor.detach().reshape(-1)
        if flat.numel() > _SAMPLE:
            flat = flat[:: flat.numel() // _SAMPLE]
        if tensor.dtype == torch.bool:
            return cls(0.0, 1.0, float(flat.float().mean()) if flat.numel() else 0.5, 0.0)
        values = flat.double() if not tensor.is_complex() else flat.real.double()
        values = values[torch.isfinite(values)]  # masks hold -inf; their finite part is the range
        if values.numel() == 0:
            return cls(0.0, 0.0, 0.0, 0.0)
        low, high = (float(v) for v in torch.aminmax(values))
        std = float(values.std()) if values.numel() > 1 else 0.0
        return cls(low, high, float(values.mean()), std)


def freeze(value: Any) -> Any:
    """Tensors become TensorSpecs and sequences tuples, so a call's arguments can key a dict."""
    if isinstance(value, torch.Tensor):
        return TensorSpec.of(value)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def specs_in(value: Any) -> Iterator[TensorSpec]:
    """The TensorSpecs of a frozen argument tree, in the order thaw() fills them."""
    if isinstance(value, TensorSpec):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from specs_in(item)


def thaw(value: Any, tensors: Iterator[Any]) -> Any:
    """A frozen argument tree with each TensorSpec replaced by the next of `tensors`."""
    if isinstance(value, TensorSpec):
        return next(tensors)
    if isinstance(value, tuple):
        return [thaw(v, tensors) for v in value]
    return value


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors_in(item)


def output_layout(out: Any) -> tuple[str, list[int], list[TensorSpec]]:
    """How an op returned its tensors: kind, their positions in a tuple or list, their specs."""
    if isinstance(out, torch.Tensor):
        return "tensor", [0], [TensorSpec.of(out)]
    if isinstance(out, (tuple, list)):
        slots = [i for i, item in enumerate(out) if isinstance(item, torch.Tensor)]
        return type(out).__name__, slots, [TensorSpec.of(out[i]) for i in slots]
    return "other", [], []


def functional(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The out-of-place twin of an in-place op (add_ -> add), the op itself if it writes no
    argument, or None: a task's reference must leave its inputs unchanged."""
    if not op._schema.is_mutable:
        return op
    name = op.overloadpacket.__name__
    twin = getattr(torch.ops.aten, name.rstrip("_"), None) if name.endswith("_") and not name.startswith("__") else None
    overload = getattr(twin, op._overloadname, None) if twin is not None else None
    return overload if overload is not None and not overload._schema.is_mutable else None


@dataclass
class CallGroup:
    """Identical calls of one op: their frozen arguments, what the first call saw, how many there were."""

    op: torch._ops.OpOverload
    args: tuple
    kwargs: tuple  # (name, frozen value) pairs, sorted by name
    mutates: bool  # the op writes an argument and has no out-of-place twin
    values: list[ValueRange]
    outputs: list[TensorSpec]
    output_kind: str  # "tensor", "tuple" or "list": how the op returns its outputs
    output_slots: list[int]  # each output's position in the returned tuple or list
    count: int = 1
    time_ms: float | None = None
    untimed: str = ""  # why replaying the call failed, when it did
    times_ms: list[float] = field(default_factory=list)  # one per timing process, when several

    @property
    def name(self) -> str:
        return f"aten.{self.op.overloadpacket.__name__}"

    @property
    def inputs(self) -> list[TensorSpec]:
        return [*specs_in(self.args), *(s for _, v in self.kwargs for s in specs_in(v))]

    @property
    def digest(self) -> str:
        """Six hex digits naming the signature: the same call gets the same id in every capture."""
        return hashlib.sha1(repr((str(self.op), self.args, self.kwargs)).encode()).hexdigest()[:6]

    @property
    def total_ms(self) -> float:
        return self.count * (self.time_ms or 0.0)

    def call(self, tensors: list[Any]) -> Any:
        """Run the op with `tensors` in place of the recorded tensor arguments."""
        stream = iter(tensors)
        args = thaw(self.args, stream)
        kwargs = {k: thaw(v, stream) for k, v in self.kwargs}
        return self.op(*args, **kwargs)

    def why_not_task(self) -> str | None:
        """None for a call worth a kernel, else why it is not a task."""
        name = self.op.overloadpacket.__name__
        # copy_ was recorded as its twin, copy. Casts and layout copies take real time (a transposed
        # bf16 -> fp32 copy), so they are tasks, though a kernel may make them with allowed ops.
        if name not in COPIES and is_allowed(name):
            return "allocation or metadata"
        if not self.inputs:
            return "creates a tensor from no tensor input (an allocation)"
        if self.mutates:
            return "writes into its arguments and has no out-of-place form"
        if not any(o.numel for o in self.outputs):
            return "returns no tensor data"
        return None


class CallRecorder(TorchDispatchMode):
    """Groups every non-view ATen call made while active; the first call of a group also records
    its inputs' value ranges (before the op runs, so an in-place op cannot change them)."""

    def __init__(self, fusion: tuple = ()) -> None:
        super().__init__()
        self.groups: dict[tuple, CallGroup] = {}
        self.calls = 0
        self.fusion = fusion  # fusion.FusionTrackers that follow dataflow between calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.is_view:
            return func(*args, **kwargs)
        op = functional(func)
        ordered = sorted(kwargs.items())
        key = (str(op or func), freeze(args), tuple((k, freeze(v)) for k, v in ordered))
        group = self.groups.get(key)
        inputs = list(tensors_in([*args, *(v for _, v in ordered)]))
        values = None if group else [ValueRange.of(t) for t in inputs]
        out = func(*args, **kwargs)
        self.calls += 1
        kind, slots, outputs = output_layout(out)
        if group:
            group.count += 1
        else:
            group = self.groups[key] = CallGroup(op or func, key[1], key[2], op is None, values, outputs, kind, slots)
        produced = [out[i] for i in slots] if kind != "tensor" else [out]
        for tracker in self.fusion:
            tracker.observe(key, group, inputs, produced)
        return out

    def __exit__(self, *exc):
        for tracker in self.fusion:
            tracker.finish()
        return super().__exit__(*exc)
