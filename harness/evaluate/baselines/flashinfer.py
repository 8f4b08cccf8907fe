"""FlashInfer (the kernel library of vLLM and SGLang) where it has the task's op at the task's dtype
and layout: RMSNorm (Llama's `x * w` and Gemma's `x * (1 + w)`), the residual add fused with it,
LayerNorm, and the gated activations SiLU-and-mul and GELU-and-mul.

The op is read from the reference's ATen calls on a sample input (_calls.py), as Liger's adapter
reads it; each plausible reading is a variant, and the reference worker times the first whose output
matches the reference's. FlashInfer builds each kernel family with nvcc at first use (tens of
seconds, counted in the baseline's setup time, never in its timing) and caches it under the worker's
FLASHINFER_WORKSPACE_BASE, which the CUDA platforms put under the run's cache folder.

Its fused residual-and-norm kernel works in place, as serving engines call it: it writes the sum
into the residual and the norm into the input. The timing loads fresh inputs before every call, and
the check runs on copies, so that changes nothing but the allocation it saves.

Where FlashInfer's kernel needs another layout than the task gives (its gated activations read gate
and up as the two halves of one tensor, as a merged gate_up projection makes them), the baseline is
skipped with that reason: copying the operands together would time a copy as FlashInfer's. Its
TensorRT-LLM attention kernels download prebuilt cubins at first use, which no machine here can.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from harness.evaluate.baselines import Baseline, NotApplicable, Sample
from harness.evaluate.baselines._calls import (
    Getter,
    arg,
    gated,
    library_variants,
    optional,
    reads_input,
    rms_norm_operands,
    source,
)

Rows = tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]


def _rows(t: torch.Tensor, ranks: tuple[int, ...] = (2, 3)) -> Rows | None:
    """t viewed, without a copy, as FlashInfer's norms take it: (rows, hidden) or (a, b, hidden),
    any strides but a last one of 1; and how to view a contiguous result of that shape as t's. Rows
    are normalised each on its own, so their order does not matter: the outer dimensions are put in
    stride order first (a [B, H, S, D] view of a [B, S, H, D] buffer becomes rows of D)."""
    if t.dim() < 2 or t.stride(-1) != 1:
        return None
    order = [*sorted(range(t.dim() - 1), key=lambda d: -t.stride(d)), t.dim() - 1]
    p = t.permute(*order)
    inverse = [order.index(d) for d in range(t.dim())]
    sizes, hidden = list(p.shape[:-1]), p.shape[-1]
    shapes = [[math.prod(sizes)]] if 2 in ranks else []
    shapes += [[math.prod(sizes[:k]), math.prod(sizes[k:])] for k in range(1, len(sizes))] if 3 in ranks else []
    for shape in shapes:
        try:
            rows = p.view(*shape, hidden)
        except RuntimeError:
            continue
        return rows, lambda r, p_shape=p.shape: r.view(p_shape).permute(*inverse)
    return None


# What each FlashInfer kernel takes (flashinfer/data/csrc/norm.cu): rmsnorm 2-D rows with a row
# stride or 3-D (a, b, hidden); gemma_rmsnorm and the fused residual kernels 2-D with a row stride;
# layernorm 2-D rows with no stride (contiguous), in bfloat16.
ROWS_2D, ROWS_2D_OR_3D = (2,), (2, 3)


def _need_rows(t: torch.Tensor, what: str, ranks: tuple[int, ...] = ROWS_2D_OR_3D) -> None:
    if t.dtype not in (torch.float16, torch.bfloat16):
        raise NotApplicable(f"FlashInfer's {what} takes float16 or bfloat16 tensors, and this task's is {t.dtype}")
    if _rows(t, ranks) is None:
        raise NotApplicable(
            f"FlashInfer's {what} needs rows it can view without a copy, and this input's layout has none"
        )


def _as_dtype(w: Getter, sample: Sample, like: torch.Tensor, dtype: torch.dtype, absent: float = 1.0) -> Getter:
    """The weight (or bias) in the dtype FlashInfer wants, made once here where it is a parameter
    or absent (filled with `absent`): only one that is a task input is converted in the timed call."""
    probe = w(list(sample.inputs))
    if probe is None:
        filled = torch.full((like.shape[-1],), absent, dtype=dtype, device=like.device)
        return lambda inputs: filled
    if not reads_input(probe, sample):
        held = probe.detach().to(dtype)
        return lambda inputs: held
    return lambda inputs: w(inputs).to(dtype)  # no copy where it has the dtype already


def _norm(norm, x: Getter, weight: Getter, eps: float, ranks: tuple[int, ...]) -> Callable[..., Any]:
    def run(*inputs):
        rows, back = _rows(x(inputs), ranks)
        out = torch.empty(rows.shape, dtype=rows.dtype, device=rows.device)
        norm(rows, weight(inputs), eps, out=out)
        return back(out)

    return run


def _add_norm(fused, x: Getter, residual: Getter, weight: Getter, eps: float, returns_sum: bool):
    def run(*inputs):
        a, r = x(inputs), residual(inputs)
        fused(_rows(a, ROWS_2D)[0], _rows(r, ROWS_2D)[0], weight(inputs), eps)  # in place: r = a + r, a = norm(r)
        return r if returns_sum else a

    return run


def _rms_norm(calls, sample: Sample) -> list[Callable[..., Any]]:
    import flashinfer

    fused = [c for c in calls if c[0] in ("rms_norm", "_fused_rms_norm")]
    if fused:
        like = fused[0][1][0]
        xs, weights = [like], [optional(arg(fused[0], 2, "weight"), sample)]
        eps = arg(fused[0], 3, "eps")
        eps = torch.finfo(like.dtype).eps if eps is None else float(eps)
    else:
        _, big, found, eps = rms_norm_operands(calls, sample)
        xs, weights = [sample.inputs[i] for i in big], [*found, lambda inputs: None]
    _need_rows(xs[0], "RMSNorm")
    kernels = [(flashinfer.rmsnorm, ROWS_2D_OR_3D), (flashinfer.gemma_rmsnorm, ROWS_2D)]
    return [
        _norm(norm, source(t, sample), _as_dtype(w, sample, t, t.dtype), eps, ranks)
        for t in xs
        for w in weights
        for norm, ranks in kernels
        if t.dtype == xs[0].dtype and _rows(t, ranks) is not None
    ]


def _residual_rms_norm(calls, sample: Sample) -> list[Callable[..., Any]]:
    """The residual add, then an RMSNorm of the sum: FlashInfer's fused_add_rmsnorm, returning the
    norm or the sum, whichever the reference returns."""
    import flashinfer

    a, b = calls[0][1][:2]
    if a.stride() != b.stride():  # each is viewed as rows on its own: the rows must pair up
        raise NotApplicable("FlashInfer's fused_add_rmsnorm needs the residual laid out as the input is")
    x, residual = source(a, sample), source(b, sample)
    _, _, found, eps = rms_norm_operands(calls[1:], sample)
    _need_rows(a, "fused_add_rmsnorm", ROWS_2D)
    return [
        _add_norm(fused, x, residual, _as_dtype(w, sample, a, a.dtype), eps, returns_sum)
        for w in [*found, lambda inputs: None]
        for fused in (flashinfer.fused_add_rmsnorm, flashinfer.gemma_fused_add_rmsnorm)
        for returns_sum in (False, True)
    ]


def _layer_norm(call, sample: Sample) -> list[Callable[..., Any]]:
    import flashinfer

    t = call[1][0]
    if len(arg(call, 1, "normalized_shape")) != 1:
        raise NotApplicable("FlashInfer's LayerNorm normalises over the last dimension only")
    if t.dtype != torch.bfloat16:
        raise NotApplicable(f"FlashInfer's LayerNorm takes bfloat16 input, and this task's is {t.dtype}")
    _need_rows(t, "LayerNorm", ROWS_2D)
    if _rows(t, ROWS_2D)[0].stride(0) != t.shape[-1]:
        raise NotApplicable("FlashInfer's LayerNorm reads its rows back to back, and this input's have gaps")
    x = source(t, sample)
    gamma = _as_dtype(optional(arg(call, 2, "weight"), sample), sample, t, torch.float32)
    beta = _as_dtype(optional(arg(call, 3, "bias"), sample), sample, t, torch.float32, absent=0.0)
    eps = float(arg(call, 4, "eps", 1e-5))

    def run(*inputs):
        rows, back = _rows(x(inputs), ROWS_2D)
        return back(flashinfer.layernorm(rows, gamma(inputs), beta(inputs), eps))

    return [run]


def _halves(gate: torch.Tensor, up: torch.Tensor) -> tuple[tuple, tuple] | None:
    """The (shape, stride) of one tensor whose last dimension's halves are gate and up, if they are."""
    d = gate.shape[-1]
    if gate.untyped_storage().data_ptr() != up.untyped_storage().data_ptr():
        return None
    if gate.shape != up.shape or gate.stride() != up.stride() or gate.stride(-1) != 1:
        return None
    if up.storage_offset() - gate.storage_offset() != d:
        return None
    shape = (*gate.shape[:-1], 2 * d)
    merged = gate.as_strided(shape, gate.stride(), gate.storage_offset())
    return (shape, gate.stride()) if merged.is_contiguous() else None


def _gated(calls, sample: Sample) -> list[Callable[..., Any]]:
    import flashinfer

    activation, gate, up = gated(calls, sample)
    what = f"{activation}_and_mul"
    kernel = getattr(flashinfer, what)
    merged = _halves(gate, up)
    if merged is None:
        raise NotApplicable(
            f"FlashInfer's {what} reads gate and up as the two halves of one tensor (as a merged gate_up "
            "projection gives them); this task's are separate tensors, and joining them would time a copy"
        )
    shape, stride = merged
    g = source(gate, sample)
    return [lambda *inputs: kernel(g(inputs).as_strided(shape, stride, g(inputs).storage_offset()))]


def variants(sample: Sample) -> list[Callable[..., Any]]:
    builders = {
        "residual_rms_norm": _residual_rms_norm,
        "rms_norm": _rms_norm,
        "layer_norm": lambda calls, sample: _layer_norm(calls[0], sample),
        "gated": _gated,
    }
    return library_variants("FlashInfer", builders, sample)


BASELINE = Baseline(
    name="flashinfer",
    description="FlashInfer's CUDA kernel for the task's op (JIT-built with nvcc at first use)",
    build=variants,
    needs=("flashinfer",),
    devices=("cuda",),
)
