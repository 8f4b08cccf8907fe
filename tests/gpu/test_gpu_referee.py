"""The referee outside the ring on a GPU (referee.py, hands.DeviceHands): the Python-level classes of attack
from tests/candidates/referee/, appended to the legitimate Triton RMSNorm, each get a verdict other
than `correct`, or `correct` at an honest time; and work queued on the GPU to slow eager beside it
does not raise a speedup.

Run on the H200 from the repository root: `python3 -m pytest tests/gpu -q -p no:cacheprovider`.
"""

from pathlib import Path

import pytest
import torch

from harness.tasks import resolve_one
from tests.gpu.test_gpu_platforms import OVERRIDES, SETTINGS

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (runs on the H200)")

HERE = Path(__file__).parent
REFEREE_PLANTS = HERE.parent / "candidates" / "referee"
RMSNORM = "rmsnorm_bf16_qwen"
LEGITIMATE = (HERE / "rmsnorm_triton.py").read_text()


def planted(name: str) -> str:
    path = REFEREE_PLANTS / f"{name}.py"
    return f"{LEGITIMATE}\n\n{(path if path.is_file() else HERE / 'candidates' / f'{name}.py').read_text()}"


@pytest.fixture(scope="module")
def triton(make_evaluator):
    return make_evaluator("triton", OVERRIDES, **SETTINGS)


@pytest.fixture(scope="module")
def legitimate(triton):
    result = triton.evaluate(resolve_one(RMSNORM), LEGITIMATE)
    assert result.verdict == "correct", result.to_json()
    return result


def honest(result, legitimate) -> bool:
    """Correct at a speedup the legitimate kernel's could be (each paired with eager at its moment)."""
    return result.correct and result.speedup_vs_eager < 5 * legitimate.speedup_vs_eager


def test_the_legitimate_kernel_is_refereed_in_batches_every_call_checked(legitimate):
    assert legitimate.timed_by == "referee" and legitimate.calls_checked >= 8, legitimate.to_json()
    assert legitimate.phases["batch"] >= 1 and legitimate.speedup_vs_eager > 0
    assert legitimate.speedup_vs_eager_p20 <= legitimate.speedup_vs_eager_p80


@pytest.mark.parametrize(
    "name",
    [
        "rewrites_report_at_exit",
        "edits_the_harness_through_frames",
        "memoizes_inputs",
        "fills_output_when_copied",
        "looks_for_other_processes",
    ],
)
def test_a_plant_is_not_correct_at_a_forged_time(triton, legitimate, name):
    result = triton.evaluate(resolve_one(RMSNORM), planted(name))
    assert not result.correct or honest(result, legitimate), result.to_json()


def test_skips_random_calls_is_incorrect(triton):
    result = triton.evaluate(resolve_one(RMSNORM), planted("skips_random_calls"))
    assert result.verdict == "incorrect" and "secret seed" in result.reason, result.to_json()


def test_overwrites_input_when_timed_is_rejected(triton):
    result = triton.evaluate(resolve_one(RMSNORM), planted("overwrites_input_when_timed"))
    assert result.verdict == "rejected" and "input 0 was modified" in result.reason, result.to_json()


def test_work_queued_to_slow_eager_does_not_raise_the_speedup(triton, legitimate):
    result = triton.evaluate(resolve_one(RMSNORM), planted("queues_work_to_slow_eager_triton"))
    assert not result.correct or result.speedup_vs_eager < 1.3 * legitimate.speedup_vs_eager, (
        result.to_json(),
        legitimate.to_json(),
    )
