"""Checks on a candidate's behaviour: output comparison with dtype-aware tolerances, input
mutation, and a dispatcher guard that catches calls of PyTorch compute ops (from Python or C++)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Tolerances honest for each dtype's precision: a kernel that computes an fp32 task in bf16
# (error ~4e-3) cannot pass the fp32 bound.
DEFAULT_TOLERANCE: dict[torch.dtype, tuple[float, float]] = {  # (atol, rtol)
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}

# ATen ops a candidate may call itself: allocation, views, copies and metadata. Anything else
# is PyTorch doing the computation the candidate was asked to write.
ALLOWED_OPS = frozenset(
    [
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "fill_",
        "zero_",
        "new_zeros",
        "new_ones",
        "new_full",
        "detach",
        "alias",
        "view",
        "_unsafe_view",
        "reshape",
        "as_strided",
        "t",
        "transpose",
        "permute",
        "squeeze",
        "unsqueeze",
        "expand",
        "flatten",
        "unflatten",
        "select",
        "slice",
        "split",
        "chunk",
        "narrow",
        "contiguous",
        "clone",
        "copy_",
        "_to_copy",
        "to",
        "lift_fresh",
        "unbind",
        "view_as_real",
        "view_as_complex",
        "_reshape_alias",
        "resize_",
        "set_",
        "is_same_size",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "_local_scalar_dense",
        # What Tensor.numpy() and friends call: they only materialise a lazy conjugate or negation bit.
        "resolve_conj",
        "resolve_neg",
    ]
)
# The allowed ops that move data: a reference made only of these (a captured cast) is still a task.
COPIES = frozenset(["copy", "_to_copy", "clone", "contiguous"])


def is_allowed(op: str) -> bool:
    """Whether an ATen op (by overload-packet name) is allocation, view, copy or metadata.

    The in-place and out-of-place spellings count as one op (`fill` and `fill_`, `squeeze_`),
    so the sandbox, the reference trace and capture agree on what is compute."""
    return bool({op, op.rstrip("_"), f"{op}_"} & ALLOWED_OPS)


@dataclass(frozen=True)
class Mismatch:
    reason: str


def tolerance_for(dtype: torch.dtype, override: dict | None = None) -> tuple[float, float]:
    atol, rtol = DEFAULT_TOLERANCE.get(dtype, (0.0, 0.0))
    override = override or {}
    return float(override.get("atol", atol)), float(override.get("rtol", rtol))


def scaled_atol(atol: float, expected: torch.Tensor) -> float:
    """The absolute tolerance in the units of the output: atol holds for outputs of order one, and
    shrinks with a smaller output's mean magnitude (a softmax over 4096 columns averages 2.4e-4, where
    an atol of 1e-4 would let a kernel 10^4 times less accurate than eager pass)."""
    if not expected.is_floating_point() or not expected.numel():
        return atol
    return atol * min(1.0, float(expected.abs().mean()))


def flatten(output: object) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in flatten(item)]
    raise TypeError(f"forward returned {type(output).__name__}; expected a tensor or a tuple of tensors")


def _worst(g: torch.Tensor, w: torch.Tensor, allowed: torch.Tensor) -> tuple[int, tuple[int, ...], int]:
    """The element furthest outside its bound, relative to the bound (NaN counts as furthest), and
    how many elements are outside theirs."""
    error = (g - w).abs()
    outside = ~(error <= allowed)  # NaN is outside
    excess = (error / allowed.clamp_min(torch.finfo(allowed.dtype).tiny)).nan_to_num(float("inf"))
    worst = int(excess.reshape(-1).argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), w.shape)) if w.dim() else ()
    return worst, index, int(outside.sum())


def _allowed(bound: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """Each element's bound from the reference's (tolerance.Expected.bounds): a tensor of the
    output's shape, or the fp64 pair (atol, rtol) of an affine bound in |want|."""
    if bound.dtype == torch.float64 and bound.shape == (2,) and want.shape != (2,):
        atol, rtol = (float(v) for v in bound)
        return want.abs().mul_(rtol).add_(atol)
    return bound.to(device=want.device, dtype=want.dtype)


def compare(
    expected: object, actual: object, tolerance: dict | None = None, bounds: list[torch.Tensor] | None = None
) -> Mismatch | None:
    """None when actual matches expected, else what differs: within each element's bound where the
    reference derived them (tolerance.py), else within the dtype's fixed atol + rtol * |expected|."""
    try:
        want, got = flatten(expected), flatten(actual)
    except TypeError as exc:
        return Mismatch(str(exc))
    if len(want) != len(got):
        return Mismatch(f"forward returned {len(got)} tensors; the reference returns {len(want)}")
    for i, (w, g) in enumerate(zip(want, got)):
        label = f"output {i}" if len(want) > 1 else "output"
        if g.shape != w.shape:
            return Mismatch(f"{label} has shape {tuple(g.shape)}; expected {tuple(w.shape)}")
        if g.dtype != w.dtype:
            return Mismatch(f"{label} has dtype {g.dtype}; expected {w.dtype}")
        # fp16/bf16/fp32 widen to fp32 exactly; tolerances are far above fp32 rounding.
        wide = torch.float64 if w.dtype == torch.float64 else torch.float32
        g, w = g.detach().to(wide), w.detach().to(wide)
        atol, rtol = tolerance_for(want[i].dtype, tolerance)
        atol = scaled_atol(atol, w)
        bound = _allowed(bounds[i], w) if bounds is not None else None
        if bound is not None and bound.shape != w.shape:
            return Mismatch(f"{label}: the reference's bounds have shape {tuple(bound.shape)}")
        allowed = bound if bound is not None else w.abs().mul_(rtol).add_(atol)
        if bool((g - w).abs_().le_(allowed).all()):  # the common case, in two fused passes
            continue
        if not torch.isfinite(g).all() and torch.isfinite(w).all():
            return Mismatch(f"{label} holds NaN or Inf where the reference is finite")
        if bound is None and torch.allclose(g, w, atol=atol, rtol=rtol, equal_nan=True):
            continue  # NaN and Inf where the reference has them, by allclose's exact rules
        if bound is not None and bool(((g - w).abs() <= bound).logical_or_(g.isnan() & w.isnan()).all()):
            continue
        worst, index, bad = _worst(g, w, allowed)
        rule = (
            f"beyond its bound (fp64 reference; atol={atol:g} + rtol={rtol:g} + eager's own error)"
            if bound is not None
            else f"(atol={atol:g}, rtol={rtol:g})"
        )
        g_at, w_at, a_at = (t.reshape(-1)[worst].item() for t in (g, w, allowed))
        return Mismatch(
            f"{label} differs at {bad} of {w.numel()} elements {rule}; furthest outside its bound at "
            f"{list(index)}: got {g_at:.6g}, expected {w_at:.6g}, bound {a_at:.3g} "
            f"({abs(g_at - w_at) / max(a_at, 1e-300):.3g}x the bound)"
        )
    return None


def agree_calls(
    eager: list[list[torch.Tensor]], actual: list[list[torch.Tensor]], tolerance: dict | None = None
) -> tuple[int, Mismatch] | None:
    """None when each call's outputs agree with eager's on the same inputs, else the first call that
    does not (its index) and why: each output's error relative to eager's, in the L2 norm, within the
    dtype's rtol (and at least 16 of its epsilons). A check cheap enough for every timed call, which a
    skipped or stale call (an error near 100%) or a lower precision (bf16 in a fp32 task: about 0.4%)
    cannot pass, and an honest reordering (a few epsilons) always does.

    Two norms a call are taken on the device and all read back at once: one call at a time, four
    waits for the device a call took as long as its work (32 calls of 64 MB: 4.8 ms a round on the
    H200). Only a call whose norms are not finite (NaN or Inf in an output) is looked at again."""
    wide = lambda t: t.to(torch.float64 if t.dtype == torch.float64 else torch.float32)
    norms = []
    for want, got in zip(eager, actual):
        for w, g in zip(want, got):
            w, g = wide(w), wide(g)
            norms.append(torch.stack([torch.linalg.vector_norm(w).double(), torch.linalg.vector_norm(g - w).double()]))
    read = iter(torch.stack(norms).tolist() if norms else [])
    for k, (want, got) in enumerate(zip(eager, actual)):
        for i, (w, g) in enumerate(zip(want, got)):
            label = f"output {i}" if len(want) > 1 else "output"
            want_norm, error_norm = next(read)
            dtype, compared = w.dtype, w.numel()
            if not math.isfinite(want_norm + error_norm):
                w, g = wide(w), wide(g)
                if not bool(torch.isfinite(g).all()) and bool(torch.isfinite(w).all()):
                    return k, Mismatch(f"{label} holds NaN or Inf where eager's is finite")
                keep = torch.isfinite(w)  # compared where eager is finite (rare: a copy per call)
                w, g = w[keep], g[keep]
                want_norm, error_norm = float(torch.linalg.vector_norm(w)), float(torch.linalg.vector_norm(g - w))
                compared = w.numel()
            atol, rtol = tolerance_for(dtype, tolerance)
            bound = max(rtol, 16 * torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0
            scale = max(want_norm, atol * compared**0.5)
            error = error_norm / scale if scale else 0.0
            if not error <= bound:
                why = f"{label} is {error:.3g} off eager's output on the same inputs (L2, relative; bound {bound:.3g})"
                return k, Mismatch(why)
    return None


def near_constant(outputs: list[object], tolerance: dict | None = None) -> str | None:
    """Why the task cannot tell a real kernel from a constant, or None: for some output, every call's
    values (across the check seeds) lie within twice its tolerance of one value, so returning that
    constant would pass. A scalar (a loss) that differs from seed to seed is informative."""
    calls = [flatten(o) for o in outputs]
    for position in range(len(calls[0]) if calls else 0):
        tensors = [call[position] for call in calls if position < len(call) and call[position].numel()]
        if not tensors:
            continue
        atol, _ = tolerance_for(tensors[0].dtype, tolerance)
        # The extremes in the tensor's own dtype (exact for a max and a min): no fp64 copy of gigabytes.
        high, low = max(float(t.max()) for t in tensors), min(float(t.min()) for t in tensors)
        if not high - low > 2 * atol:
            return (
                f"the task's reference output {position} is nearly constant across the check seeds (all values "
                "within twice the tolerance), so a kernel returning a constant would pass; nothing can be called "
                "correct until the task's inputs change"
            )
    return None


def mutated_inputs(before: list[object], after: list[object]) -> str | None:
    """Which input a call changed, if any (inputs are the caller's, never scratch space)."""
    for i, (b, a) in enumerate(zip(before, after)):
        if isinstance(b, torch.Tensor) and not torch.equal(b, a):
            return f"input {i} was modified by forward; inputs must be left unchanged"
    return None


class OpRecorder(TorchDispatchMode):
    """Records every ATen op reaching the dispatcher, including calls made from C++ extensions, in
    first-seen order (each once: it stays on for every call of a candidate, timed ones included)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: dict[str, None] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] = None
        return func(*args, **(kwargs or {}))


def forbidden_ops(ops) -> list[str]:
    """The compute ops among those recorded, in first-seen order."""
    seen: dict[str, None] = {}
    for op in ops:
        if not is_allowed(op):
            seen.setdefault(op)
    return list(seen)
