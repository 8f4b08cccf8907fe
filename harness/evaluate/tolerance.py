"""Tolerances that fit the arithmetic: the expected output computed in fp64, and a per-element
bound derived from eager PyTorch's own error against it.

A fixed bound against eager's output calls an honest kernel that sums in another order incorrect
wherever eager's rounding is large (a fp32 mat-vec with K = 2^18: eager is 8.6e-3 off the exact
result, a blocked sum 2.4e-4). Here the reference runs in fp64 (the exact result, to the inputs'
precision) and once more on the inputs' and weights' magnitudes (|x|, |W|: for the reductions of
a linear layer, a matmul, a convolution or a sum, the sum of the magnitudes that enter each
output, which is what its rounding error scales with). A candidate passes where

    |got - exact| <= atol + rtol * |exact| + KAPPA * max(rho, eps) * m

with m the magnitudes (or |exact| + mean |exact| where the magnitude pass is not one), rho eager's
largest error relative to m, and eps the dtype's epsilon. Reading fp32 inputs as bf16 is 2^16
eps per product and still fails. Where the fp64 reference cannot run, or disagrees with eager by
more than rounding explains (a comparison or an argmax that flips), the fixed bound against
eager's output stands, as before.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from harness.evaluate.checks import flatten, scaled_atol, tolerance_for

# How many times eager's own error an honest reordering may reach.
KAPPA = 4.0
# Eager's error relative to the magnitudes beyond which fp64 and eager disagree for another reason
# than rounding: this many epsilons of the dtype, and never more than 5%.
_ROUNDING_EPS, _ROUNDING_CAP = 64, 0.05


@dataclass(frozen=True)
class Expected:
    outputs: list[torch.Tensor]  # what a candidate is compared with
    # Each output's bound, or None for the fixed tolerance: a tensor of the output's shape (fp32)
    # where the magnitudes vary by element, else the pair (atol, rtol) as a 2-element fp64 tensor
    # (checks.allowed), so a 6 GB output does not need a 6 GB bound beside it.
    bounds: list[torch.Tensor] | None
    basis: dict[str, Any]  # how the bound was found, recorded with the result


def _double(value: Any, magnitude: bool) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        value = value.detach().to(torch.float64)
        return value.abs() if magnitude else value
    return value


# The model's fp64 copies (exact, magnitudes), made once per model: a session judges many calls of one
# model, and copying a large one twice per judged call cost more than the call.
_WIDENED: dict[tuple[int, bool], tuple[torch.nn.Module, torch.nn.Module]] = {}


def _widened(model: torch.nn.Module, magnitude: bool) -> torch.nn.Module:
    key = (id(model), magnitude)
    if key not in _WIDENED or _WIDENED[key][0] is not model:
        wide = copy.deepcopy(model).to(torch.float64)
        if magnitude:
            with torch.no_grad():
                for tensor in [*wide.parameters(), *wide.buffers()]:
                    if tensor.is_floating_point():
                        tensor.abs_()
        _WIDENED[key] = (model, wide)  # the model held too, so its id is not reused by another
    return _WIDENED[key][1]


def _run(model: torch.nn.Module, inputs: list[Any], magnitude: bool) -> list[torch.Tensor]:
    wide = _widened(model, magnitude)
    with torch.no_grad():
        return flatten(wide(*[_double(v, magnitude) for v in inputs]))


def fixed(eager: list[torch.Tensor]) -> Expected:
    return Expected(eager, None, {"basis": "eager", "reason": ""})


def derive(model: torch.nn.Module, inputs: list[Any], eager: list[torch.Tensor], tolerance: dict | None) -> Expected:
    """The expected outputs and their bounds for one call of the reference `model` on `inputs`,
    whose eager outputs are `eager`; the fixed bound where the device has no memory left for the
    fp64 reference (a 6 GB fp32 task needs 25 GB more for it, beside every seed's inputs)."""
    try:
        return _derive(model, inputs, eager, tolerance)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()  # a no-op where CUDA never started
        return Expected(eager, None, {"basis": "eager", "reason": "no memory left for the fp64 reference"})


def _derive(model: torch.nn.Module, inputs: list[Any], eager: list[torch.Tensor], tolerance: dict | None) -> Expected:
    if not eager or not all(t.is_floating_point() and t.dtype != torch.float64 for t in eager):
        return fixed(eager)
    try:
        exact, magnitudes = _run(model, inputs, False), _run(model, inputs, True)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # an op without fp64: the fixed bound stands
        return Expected(eager, None, {"basis": "eager", "reason": f"no fp64 reference ({type(exc).__name__})"})
    if len(exact) != len(eager) or any(e.shape != w.shape for e, w in zip(exact, eager)):
        return Expected(eager, None, {"basis": "eager", "reason": "the fp64 reference returns other shapes"})
    outputs, bounds, ratios = [], [], []
    for want, e, m in zip(eager, exact, magnitudes):
        size = e.abs()
        magnitudes_hold = m.shape == e.shape and bool(torch.isfinite(m).all()) and bool((m >= size * (1 - 1e-9)).all())
        # Magnitudes equal to the output's own (an elementwise op, a softmax of positive inputs) add
        # nothing an affine bound in |e| lacks, and need no tensor the size of the output.
        by_element = magnitudes_hold and not bool((m <= size * (1 + 1e-6)).all())
        if magnitudes_hold and not by_element:
            m = size
        elif not by_element:
            m = size + size.mean()  # not the magnitudes of a reduction: the output's own scale
        error = (want.to(torch.float64) - e).abs()
        if not bool(torch.isfinite(e).all()) or not bool(torch.isfinite(error).all()):
            return Expected(eager, None, {"basis": "eager", "reason": "the fp64 reference is not finite"})
        if bool(((m == 0) & (error > 0)).any()):
            return Expected(eager, None, {"basis": "eager", "reason": "eager errs where the magnitudes are 0"})
        rho = float((error / m.clamp_min(torch.finfo(torch.float64).tiny)).max()) if e.numel() else 0.0
        eps = torch.finfo(want.dtype).eps
        if rho > min(_ROUNDING_EPS * eps, _ROUNDING_CAP):
            return Expected(
                eager,
                None,
                {"basis": "eager", "reason": f"eager is {rho:.2g} of the magnitudes off fp64: more than rounding"},
            )
        atol, rtol = tolerance_for(want.dtype, tolerance)
        atol = scaled_atol(atol, e)
        scale = KAPPA * max(rho, eps)
        if by_element:
            bound = (atol + rtol * size + scale * m).to(torch.float32)
        else:  # atol + rtol |e| + scale (|e| + mean), an affine bound in |e| (mean 0 where m is |e|)
            mean = float(size.mean()) if e.numel() and not magnitudes_hold else 0.0
            bound = torch.tensor([atol + scale * mean, rtol + scale], dtype=torch.float64, device=e.device)
        outputs.append(e.to(want.dtype))
        bounds.append(bound)
        ratios.append(rho)
    return Expected(outputs, bounds, {"basis": "fp64", "kappa": KAPPA, "eager_error": max(ratios, default=0.0)})
