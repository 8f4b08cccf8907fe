"""The referee outside the ring (referee.py): one planted candidate per class of attack on a verdict,
a time or an op list, each of which must end in a verdict other than `correct`, or `correct` at an
honest time; and the honest work the old protocol rejected (a scalar loss), graded.

The candidates are files in tests/candidates/referee/; those that change the legitimate rmsnorm_cpp.py
(or softmax_cpp.py, cross_entropy_cpp.py) are appended to it. They run two at a time in the
background, started when the module's first test asks for them.
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.evaluate import EvalResult, Evaluator
from harness.tasks import load_kernelbench_file, resolve_one

CANDIDATES = Path(__file__).parents[1] / "candidates"
PLANTS = CANDIDATES / "referee"
# plant -> (the task, the legitimate file it is appended to, or None when it stands alone)
RMSNORM, SOFTMAX = "rmsnorm_qwen", "softmax_rows"
CROSS_ENTROPY = PLANTS / "kernelbench" / "95_CrossEntropyLoss.py"
PLANTED = {
    "rmsnorm_cpp": (RMSNORM, None),
    "rewrites_report_at_exit": (RMSNORM, "rmsnorm_cpp"),
    "slows_the_libc_clock": (RMSNORM, "rmsnorm_cpp"),
    "edits_the_harness_through_frames": (RMSNORM, "rmsnorm_cpp"),
    "skips_random_calls": (RMSNORM, "rmsnorm_cpp"),
    "memoizes_inputs": (RMSNORM, "rmsnorm_cpp"),
    "overwrites_input_when_timed": (RMSNORM, "rmsnorm_cpp"),
    "fills_output_when_copied": (RMSNORM, "rmsnorm_cpp"),
    "plants_a_library_for_others": (RMSNORM, "rmsnorm_cpp"),
    "looks_for_other_processes": (RMSNORM, "rmsnorm_cpp"),
    "burns_cpu_beside_eager": (RMSNORM, "rmsnorm_cpp"),
    "softmax_cpp": (SOFTMAX, None),
    "softmax_without_max": (SOFTMAX, "softmax_cpp"),
    "softmax_crude_exp": (SOFTMAX, "softmax_cpp"),
    "cross_entropy_cpp": (CROSS_ENTROPY, None),
    "cross_entropy_constant": (CROSS_ENTROPY, "cross_entropy_cpp"),
}


def source(name: str) -> str:
    legitimate = PLANTED[name][1]
    text = ((PLANTS if (PLANTS / f"{name}.py").is_file() else CANDIDATES) / f"{name}.py").read_text()
    if legitimate is None:
        return text
    base = ((PLANTS if (PLANTS / f"{legitimate}.py").is_file() else CANDIDATES) / f"{legitimate}.py").read_text()
    return f"{base}\n\n{text}"


def task_of(name: str):
    spec = PLANTED[name][0]
    return load_kernelbench_file(spec) if isinstance(spec, Path) else resolve_one(spec)


@pytest.fixture(scope="module")
def evaluator(make_evaluator) -> Evaluator:
    shared = make_evaluator(budget_ms=60)
    for spec in {spec for spec, _ in PLANTED.values()}:
        shared.reference(load_kernelbench_file(spec) if isinstance(spec, Path) else resolve_one(spec))
    return shared


@pytest.fixture(scope="module")
def planted(request, evaluator: Evaluator) -> Iterator[dict[str, Future[EvalResult]]]:
    selected = " ".join(item.name for item in request.session.items)
    # The poisoner goes first: the legitimate kernel's evaluations come after it.
    order = ["plants_a_library_for_others", *[n for n in PLANTED if n != "plants_a_library_for_others"]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        # The legitimate kernels always: the plants' times are weighed against theirs.
        wanted = [n for n in order if n in selected or PLANTED[n][1] is None]
        futures = {n: pool.submit(evaluator.evaluate, task_of(n), source(n)) for n in wanted}
        yield futures
        for future in futures.values():
            future.cancel()


def needs_census(result: EvalResult) -> None:
    """Skip, saying why, where this machine refuses the referee's perf events (census.py)."""
    if "census" in result.checks_skipped:
        pytest.skip(f"no census here: {result.checks_skipped['census']}")


def honest(result: EvalResult, legitimate: EvalResult, within: float = 5.0) -> bool:
    """Correct at a speedup the legitimate kernel's own could be, `within` times its upper spread (a
    forged time is 40x and more below it).
    Speedups, each paired with eager at its own moment, not times: under `-n 2` the machine's load
    changes several-fold between two evaluations, and within one the rounds' ratios spread (CI on a
    fresh clone: 0.75x to 6.7x), so the bound is the legitimate kernel's upper spread. The plant's lower
    spread is held to it: a forged clock or report lifts every round, while a burst of load beside eager
    lifts a few (a loaded run read 3.3x at p20, 52x at the median and 49x at p80)."""
    upper = max(legitimate.speedup_vs_eager, legitimate.speedup_vs_eager_p80 or 0.0)
    lower = result.speedup_vs_eager_p20 or result.speedup_vs_eager
    return result.correct and lower < within * upper


@pytest.mark.slow
def test_rmsnorm_cpp_is_refereed_every_call_judged_and_paired_with_eager(planted):
    result = planted["rmsnorm_cpp"].result()
    assert result.verdict == "correct", result.reason
    assert result.timed_by == "referee" and result.calls_checked >= 8
    needs_census(result)
    assert result.census["samples"] > 0 and result.census.get("pytorch", 0.0) < 0.1, result.census
    # Eager's brackets run under the same perf events as the candidate's (they slow a worker's calls).
    assert result.census["eager_samples"] > 0, result.census
    assert 0 < result.speedup_vs_eager_p20 <= result.speedup_vs_eager_p80 and result.speedup_vs_eager > 0
    assert result.baselines["eager"] > 0 and result.baselines_reference["eager"] > 0


def test_rewrites_report_at_exit_is_timed_by_the_referee_not_its_report(planted):
    result = planted["rewrites_report_at_exit"].result()
    assert honest(result, planted["rmsnorm_cpp"].result()), result.to_json()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the plant writes x86-64 machine code")
def test_slows_the_libc_clock_is_timed_on_a_clock_it_cannot_reach(planted):
    result = planted["slows_the_libc_clock"].result()
    assert honest(result, planted["rmsnorm_cpp"].result()), result.to_json()


def test_edits_the_harness_through_frames_is_still_seen_computing_with_pytorch(planted):
    # Its recorder and kernel lists cleared, the worker's own checks see nothing: the census does.
    needs_census(planted["rmsnorm_cpp"].result())
    result = planted["edits_the_harness_through_frames"].result()
    assert result.verdict == "rejected", result.to_json()
    assert "PyTorch's compute library" in result.reason and "perf events" in result.reason


def test_skips_random_calls_is_incorrect_on_a_call_it_skipped(planted):
    result = planted["skips_random_calls"].result()
    assert result.verdict == "incorrect", result.to_json()
    assert "secret seed" in result.reason


def test_memoizes_inputs_never_sees_an_input_twice(planted):
    # Fresh draws never repeat; rotations of a slow task's pooled draws do not rotate its output; and
    # its lookups are PyTorch's compute (the census): never correct at a copy's cost.
    result = planted["memoizes_inputs"].result()
    assert not result.correct or honest(result, planted["rmsnorm_cpp"].result()), result.to_json()


def test_overwrites_input_when_timed_is_rejected_on_the_call_it_did(planted):
    result = planted["overwrites_input_when_timed"].result()
    assert result.verdict == "rejected", result.to_json()
    assert "input 0 was modified" in result.reason


def test_fills_output_when_copied_is_timed_with_the_fill_or_wrong(planted):
    # The worker copies outputs inside the referee's bracket, with libc's memcpy: either the fill
    # runs inside the time, or never (an empty output).
    result = planted["fills_output_when_copied"].result()
    assert result.verdict == "incorrect" or honest(result, planted["rmsnorm_cpp"].result()), result.to_json()


@pytest.mark.slow
def test_plants_a_library_for_others_poisons_nobody_and_reads_no_other_source(planted, evaluator):
    planter = planted["plants_a_library_for_others"].result()
    assert planter.verdict == "correct", planter.to_json()  # it found no other candidate's source
    after = evaluator.evaluate(task_of("rmsnorm_cpp"), source("rmsnorm_cpp"))
    assert honest(after, planted["rmsnorm_cpp"].result()), after.to_json()


def test_looks_for_other_processes_finds_none(planted):
    result = planted["looks_for_other_processes"].result()
    assert result.verdict == "correct", result.to_json()


def test_burns_cpu_beside_eager_is_stopped_while_eager_runs(planted):
    # Its helpers are stopped with it outside its calls (hands.Freezer): eager's cores are its own.
    # Measured on the 2-core machine without the freezer: 2.7x and 2.9x against the kernel's 1.5x and
    # 1.5x (1.8 and 1.9 times); with it, 1.6x and 0.2x against 1.9x (the helpers run in its own brackets).
    # Its lower spread against the kernel's upper, as honest() weighs them: CI on a fresh clone read
    # the kernel's median at 0.23x (the machine's load swung between two evaluations), the burner's 0.66x.
    result, legitimate = planted["burns_cpu_beside_eager"].result(), planted["rmsnorm_cpp"].result()
    assert result.correct and legitimate.correct, result.to_json()
    assert honest(result, legitimate, within=1.4), (result.to_json(), legitimate.to_json())


def test_softmax_cpp_is_correct_on_extreme_draws_too(planted):
    result = planted["softmax_cpp"].result()
    assert result.verdict == "correct", result.to_json()


def test_softmax_without_max_is_incorrect_on_large_logits(planted):
    result = planted["softmax_without_max"].result()
    assert result.verdict == "incorrect", result.to_json()
    assert "extreme draw" in result.reason and "x100" in result.reason


def test_softmax_crude_exp_fails_a_tolerance_in_the_outputs_units(planted):
    result = planted["softmax_crude_exp"].result()
    assert result.verdict == "incorrect", result.to_json()


def test_cross_entropy_cpp_a_kernelbench_loss_is_graded_and_floored_by_its_own_bytes(planted):
    result = planted["cross_entropy_cpp"].result()
    assert result.verdict == "correct", result.to_json()
    assert result.sol_fraction is not None  # no bytes_moved in a KernelBench file: its inputs' and output's


def test_cross_entropy_constant_for_a_kernelbench_loss_is_incorrect(planted):
    result = planted["cross_entropy_constant"].result()
    assert result.verdict == "incorrect", result.to_json()


def test_device_memory_the_candidates_worker_cannot_open_is_the_harness_fault(tmp_path):
    # Before any candidate code runs: the machine's failure, never a verdict on the candidate.
    from harness import devices, serial
    from harness.evaluate.protocol import Layout
    from harness.evaluate.session_run import serve_candidate
    from harness.evaluate.verdict import HarnessFault

    request = {
        "layout": serial.to_dict(Layout([], [], 64, 64)),
        "regions": {"call_inputs": {"handle": "00"}, "call_outputs": {"handle": "00"}},
        "result_path": str(tmp_path / "result.json"),
    }
    with pytest.raises(HarnessFault, match="could not open the reference session's device memory"):
        serve_candidate(request, devices.load("cpu"), None)
