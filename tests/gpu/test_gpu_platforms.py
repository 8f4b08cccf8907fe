"""The cuda and triton platforms on a real GPU: legitimate kernels are correct, and every planted
cheat or fault (tests/gpu/candidates/) gets its verdict, with the run going on after each.

Run on the H200 from the repository root: `python3 -m pytest tests/gpu -q -p no:cacheprovider`.
"""

import os
from pathlib import Path

import pytest
import torch

from harness.tasks import resolve_one
from tests.one_input_tasks import one_input_task

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (runs on the H200)")

HERE = Path(__file__).parent
PLANTED = HERE / "candidates"
SOFTMAX, RMSNORM = "softmax_fp16_attn", "rmsnorm_bf16_qwen"
# Baselines beyond eager are measured by benchmarks/report.py, not here; and the GPU image may
# not let other users open the device, in which case workers cannot run as nobody.
AS_NOBODY = f"platform.drop_privileges={os.environ.get('FORGEBENCH_GPU_AS_NOBODY', '1') == '1'}"
OVERRIDES = ("platform.baselines=[eager]", AS_NOBODY)
SETTINGS = {"timeout_s": 120, "budget_ms": 100, "warmup_ms": 20}
HANG_TIMEOUT_S = 15

# Planted candidate -> the legitimate kernel it is appended to (it subclasses that ModelNew).
APPENDED_TO = {
    "calls_torch_softmax": "softmax_triton",
    "torch_fallback_cuda": "softmax_cuda",
    "writes_into_input_triton": "softmax_triton",
    "caches_by_address_triton": "softmax_triton",
    "side_stream_triton": "softmax_triton",
    "joins_side_stream_triton": "softmax_triton",
    "skips_work_when_profiled_triton": "softmax_triton",
    "patches_timers_triton": "softmax_triton",
    "forges_result_triton": "softmax_triton",
    "exits_in_forward_triton": "softmax_triton",
    "torch_on_a_thread_triton": "softmax_triton",
    "returns_lazy_subclass_triton": "softmax_triton",
    "uses_torch_when_unobserved_triton": "softmax_triton",
}
# (platform, planted candidate, the verdicts it may get, a fragment its reason must hold)
CHEATS = [
    ("triton", "calls_torch_softmax", {"rejected"}, "aten._softmax"),
    ("cuda", "torch_fallback_cuda", {"rejected"}, "aten._softmax"),
    ("triton", "writes_into_input_triton", {"rejected"}, "input 0 was modified"),
    ("triton", "caches_by_address_triton", {"incorrect"}, "differs"),
    # The profiler starts through its C API, so its Python flag never tells; the one question left,
    # torch._C._autograd._profiler_enabled(), is noted when a candidate asks it.
    ("triton", "skips_work_when_profiled_triton", {"rejected"}, "asked whether it is observed"),
    ("triton", "patches_timers_triton", {"rejected"}, "torch.cuda.Event.elapsed_time"),
    # The source audit names its gc.get_objects; were it spelt otherwise, what it finds is not the answer.
    ("triton", "reads_harness_memory_triton", {"rejected", "incorrect"}, ""),
    # It rewrites its report as its process ends: the referee reads that as the forgery it is.
    ("triton", "forges_result_triton", {"rejected"}, "a forged record"),
    ("triton", "exits_in_forward_triton", {"crash"}, "exited with status 0"),
    ("triton", "segfaults_host", {"crash"}, "SIGSEGV"),
    ("triton", "illegal_access_triton", {"crash", "runtime_error"}, ""),
    ("cuda", "exhausts_gpu_memory", {"runtime_error", "crash"}, "memory"),
    # Issue 15: PyTorch out of the dispatch mode's sight, lazy outputs, asking if observed.
    ("triton", "torch_on_a_thread_triton", {"rejected"}, "at::native"),
    ("triton", "returns_lazy_subclass_triton", {"rejected"}, "plain torch.Tensor"),
    ("triton", "uses_torch_when_unobserved_triton", {"rejected"}, "asked whether it is observed"),
]
LEGITIMATE = [
    ("cuda", "softmax_cuda", SOFTMAX),
    ("triton", "softmax_triton", SOFTMAX),
    ("triton", "rmsnorm_triton", RMSNORM),
]


def candidate(name: str) -> str:
    if name in APPENDED_TO:
        return f"{(HERE / f'{APPENDED_TO[name]}.py').read_text()}\n\n{(PLANTED / f'{name}.py').read_text()}"
    path = PLANTED / f"{name}.py"
    return (path if path.is_file() else HERE / f"{name}.py").read_text()


@pytest.fixture(scope="module")
def cuda(make_evaluator):
    return make_evaluator("cuda", OVERRIDES, **SETTINGS)


@pytest.fixture(scope="module")
def triton(make_evaluator):
    return make_evaluator("triton", OVERRIDES, **SETTINGS)


@pytest.mark.parametrize(("platform", "name", "verdicts", "fragment"), CHEATS, ids=[c[1] for c in CHEATS])
def test_planted_cheat_gets_its_verdict(request, platform, name, verdicts, fragment):
    result = request.getfixturevalue(platform).evaluate(resolve_one(SOFTMAX), candidate(name))
    assert result.verdict in verdicts, result.to_json()
    assert fragment in result.reason, result.to_json()


@pytest.mark.parametrize(("platform", "name", "task_id"), LEGITIMATE, ids=[c[1] for c in LEGITIMATE])
def test_legitimate_kernel_is_correct(request, platform, name, task_id):
    result = request.getfixturevalue(platform).evaluate(resolve_one(task_id), candidate(name))
    assert result.verdict == "correct", result.to_json()
    assert result.speedup_vs_eager > 0 and result.env["device_name"]


# Plants that hid work from the worker's own timer (events on one stream): the referee's clock waits
# for the whole device, so they gain nothing; a side stream's race with the output copy may also make
# them wrong.
TIMER_ESCAPES = ["side_stream_triton", "joins_side_stream_triton"]


@pytest.mark.parametrize("name", TIMER_ESCAPES)
def test_work_hidden_from_a_stream_timer_is_timed_by_the_referee(triton, name):
    task = resolve_one(SOFTMAX)
    legitimate = triton.evaluate(task, candidate("softmax_triton"))
    result = triton.evaluate(task, candidate(name))
    assert legitimate.correct and result.verdict in ("correct", "incorrect", "rejected"), result.to_json()
    if result.correct:
        assert result.timed_by == "referee", result.to_json()
        assert result.speedup_vs_eager < 1.2 * legitimate.speedup_vs_eager, (result.to_json(), legitimate.to_json())


def test_nvrtc_softmax_is_cached_the_second_time(cuda):
    task = resolve_one(SOFTMAX)
    cuda.evaluate(task, candidate("softmax_cuda"))
    second = cuda.evaluate(task, candidate("softmax_cuda"))
    assert second.verdict == "correct" and second.cached_build, second.to_json()


def test_illegal_memory_access_is_a_crash_and_the_next_candidate_runs(cuda):
    task = resolve_one(SOFTMAX)
    bad = cuda.evaluate(task, (HERE / "illegal_access_cuda.py").read_text())
    assert bad.verdict in ("crash", "runtime_error"), bad.to_json()
    assert "illegal memory access" in bad.reason or "SIG" in bad.reason
    assert cuda.evaluate(task, candidate("softmax_cuda")).verdict == "correct"


def test_work_left_on_a_side_stream_is_not_correct(cuda):
    launch = "kernel(grid=(rows, 1, 1), block=(512, 1, 1), args=[x, y, cols])"
    source = (
        candidate("softmax_cuda")
        .replace(
            'kernel = compile_cuda(SOURCE, "softmax_rows")',
            'kernel = compile_cuda(SOURCE, "softmax_rows")\nside = torch.cuda.Stream()',
        )
        .replace(launch, launch[:-1] + ", stream=side)")
    )
    assert "stream=side" in source
    result = cuda.evaluate(resolve_one(SOFTMAX), source)
    assert result.verdict in ("rejected", "incorrect"), result.to_json()


@pytest.mark.parametrize("platform", ["cuda", "triton"])
def test_a_kernel_spinning_forever_times_out_and_the_next_candidate_runs(make_evaluator, platform):
    impatient = make_evaluator(platform, OVERRIDES, **{**SETTINGS, "timeout_s": HANG_TIMEOUT_S})
    task = resolve_one(SOFTMAX)
    hung = impatient.evaluate(task, candidate(f"spins_forever_{platform}"))
    assert hung.verdict == "timeout", hung.to_json()
    after = impatient.evaluate(task, candidate(f"softmax_{platform}"))
    assert after.verdict == "correct", after.to_json()


def test_zeros_on_a_task_whose_output_is_nearly_constant_are_rejected(tmp_path, triton):
    constant = one_input_task(tmp_path, "zero_times_x_fp16", "x * 0.0", "torch.randn(4096, 4096).half()")
    result = triton.evaluate(resolve_one(constant), candidate("zeros_triton"))
    assert result.verdict == "rejected", result.to_json()
    assert "nearly constant" in result.reason


@pytest.mark.parametrize(("name", "task_id"), [("rmsnorm_triton", RMSNORM), ("softmax_triton", SOFTMAX)])
def test_liger_is_timed_where_it_has_the_op(make_evaluator, name, task_id):
    pytest.importorskip("liger_kernel", reason="liger-kernel is an optional extra (pip install 'forgebench[gpu]')")
    evaluator = make_evaluator("triton", ("platform.baselines=[eager,liger]", AS_NOBODY), **SETTINGS)
    result = evaluator.evaluate(resolve_one(task_id), candidate(name))
    assert result.verdict == "correct", result.to_json()
    assert result.baselines.get("liger", 0) > 0, result.baselines_skipped
    assert result.speedups["liger"] > 0


# Tasks FlashInfer has a kernel for at their dtype and layout (a handwritten RMSNorm; Qwen3.5's
# residual add and Gemma-style RMSNorm; SD3.5's per-head RMSNorm on a [B, H, S, D] view of a
# [B, S, H, D] buffer; SD3.5's LayerNorm without affine parameters), and tasks it is skipped on with
# the reason's words: Gemma 4's GELU-and-mul has gate and up as separate tensors; softmax is not its op.
FLASHINFER = [
    (RMSNORM, None),
    ("qwen35_fused11_add_to_copy_8x1x4096_7447d5", None),
    ("sd35_fused8_to_copy_mul_2x24x333x64_ab63a3", None),
    ("sd35_native_layer_norm_2x333x1536_fe94e1", None),
    ("gemma4_fused2_gelu_mul_8x1x21504_ba362f", "two halves of one tensor"),
    (SOFTMAX, "no kernel for this op"),
]


@pytest.fixture(scope="module")
def with_flashinfer(make_evaluator, tmp_path_factory):
    pytest.importorskip("flashinfer", reason="flashinfer-python is an optional extra (pip install 'forgebench[gpu]')")
    root = tmp_path_factory.mktemp("flashinfer")  # one cache: its JIT builds once for every task here
    root.chmod(0o711)
    return make_evaluator("triton", ("platform.baselines=[eager,flashinfer]", AS_NOBODY), root=root, **SETTINGS)


@pytest.mark.parametrize(("task_id", "skipped"), FLASHINFER)
def test_flashinfer_is_timed_where_it_has_the_op_at_the_tasks_layout(with_flashinfer, task_id, skipped):
    report = with_flashinfer.reference(resolve_one(task_id)).report
    if skipped is None:
        assert report.baselines.get("flashinfer", 0) > 0, report.baselines_skipped
        assert report.baselines_setup_s["flashinfer"] > 0
    else:
        assert skipped in report.baselines_skipped.get("flashinfer", ""), report.baselines_skipped


def test_a_call_that_keeps_the_gpu_waiting_on_the_host_shows_it_in_host_ms():
    # 2 ms of host work before a kernel of a few microseconds: the events measure the wait, and
    # host_ms says so, for the reader of a record and for the analyst.
    import time

    from harness.evaluate import timing

    device = torch.device("cuda")
    x = torch.randn(1024, device=device)

    def slow_host(x):
        time.sleep(0.002)
        return x * 2

    measured = timing.measure(slow_host, [[x]], device, budget_ms=50, warmup_ms=5)
    assert measured.host_ms >= 2.0
    assert measured.median_ms >= 0.5 * measured.host_ms


def test_with_a_gpu_lead_a_host_bound_call_is_timed_at_its_gpu_work():
    import time

    from harness.evaluate import timing

    device = torch.device("cuda")
    x = torch.randn(1024, device=device)

    def slow_host(x):  # 0.3 ms of host work, then a kernel of a few microseconds
        time.sleep(0.0003)
        return x * 2

    plain = timing.measure(slow_host, [[x]], device, budget_ms=50, warmup_ms=5)
    led = timing.measure(slow_host, [[x]], device, budget_ms=50, warmup_ms=5, gpu_lead=True)
    assert plain.median_ms >= 0.2 and plain.lead_ms == 0.0  # the events waited for the host
    assert led.lead_ms >= 0.3 and led.median_ms < 0.1, led  # the launch was queued before the start event


# 256 tiny launches: eager's host takes about twice as long to issue them as the GPU to run them.
_MANY_LAUNCHES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        for _ in range(256):
            x = x * 1.0001
        return x


def get_inputs():
    return [torch.randn(4096)]


def get_init_inputs():
    return []
"""


def test_baselines_are_timed_at_their_gpu_work_unless_the_lead_is_off(make_evaluator, tmp_path):
    task_file = tmp_path / "many_launches.py"
    task_file.write_text(_MANY_LAUNCHES)
    task = resolve_one(str(task_file))
    led = make_evaluator("cuda", OVERRIDES, **SETTINGS).reference(task).report
    plain = make_evaluator("cuda", OVERRIDES, **SETTINGS, baseline_gpu_lead=False).reference(task).report
    assert "eager" in led.baselines and "eager" in plain.baselines, (led.baselines_skipped, plain.baselines_skipped)
    led_ms, led_host = led.baselines["eager"], led.baselines_host_ms["eager"]
    plain_ms, plain_host = plain.baselines["eager"], plain.baselines_host_ms["eager"]
    # Each time against the host time of the same calls, measured in the same window: the host's
    # speed drifts from one evaluator's reference run to the next (the two led and plain times were
    # once compared directly, and that failed in one call of two).
    assert plain_ms >= 0.8 * plain_host, (plain_ms, plain_host)  # without the lead: the host's time
    assert led_ms < 0.8 * led_host, (led_ms, led_host)  # with it: 256 small kernels, queued ahead


def test_a_profiled_correct_candidate_gets_nsight_compute_metrics(triton):
    # The H200 (Firecracker) lets ncu read the counters, as root and as nobody (device/KINDS.md).
    result = triton.evaluate(resolve_one(SOFTMAX), candidate("softmax_triton"), profile=True)
    assert result.correct, result.reason
    ncu = result.profile["ncu"]
    assert ncu.get("kernels"), ncu  # otherwise ncu's first error, for the record
    kernel = ncu["kernels"][0]
    assert kernel["time_ns"] > 0 and 0 < kernel["dram_pct"] <= 100, kernel
