"""The per-call agreement with eager (checks.agree_calls): the cheap check every timed call gets."""

import torch

from harness.evaluate.checks import agree_calls


def _calls(n: int, seed: int = 0) -> list[list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    return [[torch.randn(64, 32, generator=generator), torch.randn(8, generator=generator)] for _ in range(n)]


def test_calls_that_agree_pass_and_an_honest_reordering_does_too():
    eager = _calls(5)
    reordered = [[t * (1 + 1e-7) for t in call] for call in eager]
    assert agree_calls(eager, reordered) is None


def test_the_first_call_that_disagrees_is_named_with_its_output():
    eager = _calls(5)
    got = [[t.clone() for t in call] for call in eager]
    got[3][1] += 1.0  # a stale or wrong second output of the fourth call
    got[4][0].zero_()
    k, mismatch = agree_calls(eager, got)
    assert k == 3 and mismatch.reason.startswith("output 1 is ")


def test_lower_precision_is_caught_in_a_fp32_task():
    eager = _calls(3)
    got = [[t.to(torch.bfloat16).float() for t in call] for call in eager]
    found = agree_calls(eager, got)
    assert found is not None and found[0] == 0


def test_nan_where_eager_is_finite_fails_and_eager_s_own_nan_is_left_out():
    eager = _calls(2)
    got = [[t.clone() for t in call] for call in eager]
    got[1][0][0, 0] = float("nan")
    k, mismatch = agree_calls(eager, got)
    assert k == 1 and "NaN or Inf where eager's is finite" in mismatch.reason
    eager[0][0][5, 5] = float("inf")  # eager overflows there: compared where it is finite
    got = [[t.clone() for t in call] for call in eager]
    got[0][0][5, 5] = 0.0
    assert agree_calls(eager, got) is None
    got[0][0][1, 1] += 100.0
    assert agree_calls(eager, got)[0] == 0


def test_integer_and_boolean_outputs_must_match_exactly():
    eager = [[torch.arange(10), torch.tensor([True, False])]]
    assert agree_calls(eager, [[torch.arange(10), torch.tensor([True, False])]]) is None
    assert agree_calls(eager, [[torch.arange(10), torch.tensor([True, True])]])[1].reason.startswith("output 1")
