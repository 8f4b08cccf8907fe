"""The patched model's outputs against eager's: float error, and for integer outputs (an LLM's
tokens) whether every one is the same."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils._pytree import tree_flatten


def _tensors(out: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


def agreement(eager: Any, patched: Any) -> dict:
    """Max and mean absolute error of the patched model's outputs against eager's; for integer
    outputs (an LLM's tokens) whether they are all the same."""
    errors, tokens = [], []
    if len(_tensors(eager)) != len(_tensors(patched)):
        return {"tokens_match": None, "output_mismatch": "the patched model returns another number of tensors"}
    for a, b in zip(_tensors(eager), _tensors(patched)):
        if a.shape != b.shape:
            found_shape = f"an output of shape {tuple(b.shape)} where eager's is {tuple(a.shape)}"
            return {"tokens_match": False if not a.is_floating_point() else None, "output_mismatch": found_shape}
        if a.is_floating_point():
            a, b = a.double(), b.double()
            same = (a == b) | (a.isnan() & b.isnan())  # equal infinities and NaNs in both are no error
            errors.append(torch.where(same, torch.zeros_like(a), (a - b).abs()))
        else:
            tokens.append(bool(torch.equal(a, b)))
    found: dict[str, Any] = {"tokens_match": all(tokens) if tokens else None}
    if errors:
        found["max_output_error"] = (
            max(float(e.max()) for e in errors if e.numel()) if any(e.numel() for e in errors) else 0.0
        )
        found["mean_output_error"] = float(torch.cat([e.reshape(-1) for e in errors]).mean())
        if not all(math.isfinite(found[k]) for k in ("max_output_error", "mean_output_error")):
            # A record holds finite numbers only (serial.py): an infinite error is said in words.
            found["output_mismatch"] = f"an output differs by {found.pop('max_output_error')} (not finite)"
            found.pop("mean_output_error")
    return found
