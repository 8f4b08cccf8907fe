"""Tolerances that fit the arithmetic: a bound derived in fp64 from the reference, which an honest
reordered sum meets and a lower-precision shortcut misses by far; and outputs read as their tensors."""

from __future__ import annotations

import numpy as np
import torch

from harness.evaluate import tolerance
from harness.evaluate.checks import compare

M, K = 64, 2**18  # a fp32 mat-vec whose eager sum rounds far more than a blocked one


class MatVec(torch.nn.Module):
    def forward(self, a, x):
        return torch.matmul(a, x)


def _bf16(array: np.ndarray) -> np.ndarray:
    """fp32 values as bf16 would hold them (the low 16 bits dropped)."""
    return (array.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def _blocked(a: np.ndarray, x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy((a.reshape(M, -1, 1024) * x.reshape(-1, 1024)).sum(-1).sum(-1).reshape(M, 1))


def test_a_blocked_sum_passes_the_fp64_bound_and_bf16_inputs_fail_it_by_far():
    torch.manual_seed(0)
    a, x = torch.randn(M, K), torch.randn(K, 1)
    eager = [MatVec()(a, x)]
    expected = tolerance.derive(MatVec(), [a, x], eager, None)
    assert expected.basis["basis"] == "fp64", expected.basis
    honest = _blocked(a.numpy(), x.numpy()[:, 0])
    # Against an eager that rounds badly (one running fp32 total, as a single-threaded BLAS may sum:
    # how eager sums depends on its threads), the fixed bound fails the honest kernel.
    running = np.add.accumulate(a.numpy() * x.numpy()[:, 0], axis=1, dtype=np.float32)[:, -1:]
    assert compare([torch.from_numpy(running.copy())], [honest]) is not None
    assert compare(expected.outputs, [honest], None, expected.bounds) is None
    assert compare(expected.outputs, eager, None, expected.bounds) is None  # eager passes its own bound
    cheat = _blocked(_bf16(a.numpy()), _bf16(x.numpy()[:, 0]))
    mismatch = compare(expected.outputs, [cheat], None, expected.bounds)
    assert mismatch is not None
    # The element it names is outside its bound, and says by how much.
    times = float(mismatch.reason.split("(")[-1].split("x the bound")[0])
    assert times > 10, mismatch.reason


def test_an_op_that_flips_in_fp64_keeps_the_fixed_bound():
    class Sign(torch.nn.Module):
        def forward(self, x):
            return (x > 0.5).float() * x

    x = torch.full((64,), 0.5) + torch.randn(64) * 1e-9  # fp32 rounds these onto the threshold
    eager = [Sign()(x)]
    expected = tolerance.derive(Sign(), [x], eager, None)
    assert expected.bounds is None or compare(expected.outputs, eager, None, expected.bounds) is None


def test_a_forward_returning_a_tuple_is_read_as_its_tensors():
    from harness.evaluate import outputs

    first, second = torch.ones(2), torch.zeros(3)
    assert outputs.leaves((first, [second])) == [first, second]
    assert "Carrier" in outputs.leaves((first, first.as_subclass(type("Carrier", (torch.Tensor,), {}))))
