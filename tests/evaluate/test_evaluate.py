"""The evaluator against planted candidates: each cheat, crash and mistake is one named test.

The candidates are files in tests/candidates/. An evaluation starts two Python+torch processes
(about 5 s on two cores), so the evaluations that depend on nothing else start together, two at
a time, when the module's first test asks for them, and each test waits for its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from harness.evaluate import EvalResult, Evaluator
from harness.tasks import Task, resolve_one
from tests.one_input_tasks import model_new, one_input_task

CANDIDATES = Path(__file__).parents[1] / "candidates"
LEGITIMATE = "rmsnorm_cpp"
# Cheats written as changes to the legitimate candidate are appended to it, so they share its
# kernel source and build it once (builds are cached by content).
APPENDED = {
    "forgets_weight",
    "writes_into_input",
    "returns_first_output",
    "caches_by_input_address",
    "forges_result_and_exits",
    "looks_for_api_keys",
    "patches_timers",
    "works_after_return",
    "leaves_a_daemon",
    "returns_lazy_subclass",
    "returns_plain_subclass",
    "uses_torch_when_unobserved",
    "asks_if_observed",
    "torch_on_a_thread",
    "patches_the_harness",
    "skips_work_when_timed",
    "pops_the_recorder",
    "torch_until_profiled",
}
# Evaluated by the shared evaluator in the background; each test's name starts with its candidate's.
BACKGROUND = (
    "rmsnorm_cpp",
    "forgets_weight",
    "cpp_syntax_error",
    "python_syntax_error",
    "raises_in_forward",
    "calls_torch_ops",
    "writes_into_input",
    "segfaults",
    "exits_at_import",
    "exits_in_forward",
    "allocates_64gb",
    "returns_first_output",
    "caches_by_input_address",
    "forges_result_and_exits",
    "patches_timers",
    "works_after_return",
    "leaves_a_daemon",
    "returns_lazy_subclass",
    "returns_plain_subclass",
    "uses_torch_when_unobserved",
    "asks_if_observed",
    "torch_on_a_thread",
    "patches_the_harness",
    "skips_work_when_timed",
    "pops_the_recorder",
    "torch_until_profiled",
)
HANG_TIMEOUT_S = 20


def source(name: str) -> str:
    text = (CANDIDATES / f"{name}.py").read_text()
    return f"{(CANDIDATES / f'{LEGITIMATE}.py').read_text()}\n\n{text}" if name in APPENDED else text


@pytest.fixture(scope="module")
def task() -> Task:
    return resolve_one("rmsnorm_qwen")


@pytest.fixture(scope="module")
def evaluator(make_evaluator, task: Task) -> Evaluator:
    shared = make_evaluator()
    shared.reference(task)  # once, before evaluations run concurrently
    return shared


@pytest.fixture(scope="module")
def planted(request, task: Task, evaluator: Evaluator, make_evaluator) -> Iterator[dict[str, Future[EvalResult]]]:
    """Candidate name -> its evaluation, started for the candidates of the selected tests."""
    selected = [item.name for item in request.session.items]
    wanted = [
        name
        for name in ("hangs", *BACKGROUND)
        if any(t.startswith(f"test_{name}") or t.endswith(f"[{name}]") for t in selected)  # or a table's row
    ]
    impatient = make_evaluator(timeout_s=HANG_TIMEOUT_S)
    with ThreadPoolExecutor(max_workers=2) as pool:
        # The hang goes first: it holds its slot for the whole time limit.
        futures = {}
        for name in wanted:
            runner = impatient if name == "hangs" else evaluator
            futures[name] = pool.submit(runner.evaluate, task, source(name))
        yield futures
        for future in futures.values():
            future.cancel()


def test_rmsnorm_cpp_is_correct_and_timed_against_eager(planted):
    result = planted["rmsnorm_cpp"].result()
    assert result.verdict == "correct", result.reason
    assert result.time_ms > 0 and result.speedup_vs_eager > 0
    assert result.baselines["eager"] > 0
    assert {"build_s", "check_s", "timing_s"} <= result.phases.keys()
    # On the CPU a call's host time is its time; on a GPU the two part when the GPU waits for the host.
    assert 0 < result.host_ms <= 2 * result.time_ms
    # Host times are the reference worker's, beside its own eager time (the referee pairs eager anew).
    assert 0 < result.baselines_host_ms["eager"] <= 2 * result.baselines_reference["eager"]


def test_rmsnorm_cpp_again_loads_its_cached_build(planted, task, evaluator):
    planted["rmsnorm_cpp"].result()
    again = evaluator.evaluate(task, source(LEGITIMATE))
    assert again.verdict == "correct", again.reason
    assert again.cached_build
    assert again.phases["build_s"] < 0.5


@pytest.mark.slow
def test_outputs_are_not_kept_once_judged_and_a_released_task_is_judged_afresh(planted, task, make_evaluator):
    planted["rmsnorm_cpp"].result()  # its build is cached: this evaluator loads it
    own = make_evaluator()
    assert own.evaluate(task, source(LEGITIMATE)).correct
    kept = sorted(p.name for p in (own.work_dir / "candidates").rglob("*") if p.is_file())
    assert "candidate.py" in kept and "outputs.bin" not in kept, kept
    expected = own.reference(task).outputs_path
    assert expected.is_file()
    own.release(task)  # the suite calls it when the task's agent is done
    assert not expected.exists()
    again = own.evaluate(task, source(LEGITIMATE))
    assert again.correct, again.reason


def test_forgets_weight_is_incorrect_naming_the_mismatch(planted):
    result = planted["forgets_weight"].result()
    assert result.verdict == "incorrect"
    assert "output differs at" in result.reason and "expected" in result.reason and "seed" in result.reason


def test_cpp_syntax_error_is_a_compile_error_with_the_compilers_message(planted):
    result = planted["cpp_syntax_error"].result()
    assert result.verdict == "compile_error"
    assert "CompileError" in result.reason and "kernel.cpp" in result.reason and "error: expected" in result.reason


def test_python_syntax_error_is_a_compile_error_naming_the_line(planted):
    result = planted["python_syntax_error"].result()
    assert result.verdict == "compile_error"
    assert "SyntaxError" in result.reason and "line 7" in result.reason


def test_raises_in_forward_is_a_runtime_error_with_the_exception(planted):
    result = planted["raises_in_forward"].result()
    assert result.verdict == "runtime_error"
    assert "ValueError: kernel launch failed" in result.reason


def test_calls_torch_ops_is_rejected_naming_the_aten_ops(planted):
    result = planted["calls_torch_ops"].result()
    assert result.verdict == "rejected"
    assert "aten.pow" in result.reason and "aten.rsqrt" in result.reason


def test_writes_into_input_is_rejected(planted):
    result = planted["writes_into_input"].result()
    assert result.verdict == "rejected"
    assert "input 0 was modified" in result.reason


def test_hangs_times_out(planted):
    result = planted["hangs"].result()
    assert result.verdict == "timeout"
    assert f"within {HANG_TIMEOUT_S} s" in result.reason


def test_segfaults_is_a_crash_naming_sigsegv(planted):
    result = planted["segfaults"].result()
    assert result.verdict == "crash"
    assert "SIGSEGV" in result.reason
    assert result.baselines["eager"] > 0  # the task's baselines stand whatever the candidate did


def test_exits_at_import_is_a_crash(planted):
    result = planted["exits_at_import"].result()
    assert result.verdict == "crash"
    assert "exited with status 0 before writing its result" in result.reason


def test_exits_in_forward_is_a_crash(planted):
    result = planted["exits_in_forward"].result()
    assert result.verdict == "crash"
    assert "exited with status 0 before writing its result" in result.reason


KILLED_MID_BUILD = """
import os
lock = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kernel_ext", "lock")
os.makedirs(os.path.dirname(lock), exist_ok=True)
open(lock, "w").close()  # as torch's extension builder holds it while it builds
os._exit(1)
"""


# Waits on the lock as torch's load_inline does (FileBaton), then is the legitimate kernel.
WAITS_ON_BUILD_LOCK = """
import os
from torch.utils.file_baton import FileBaton
folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kernel_ext")
os.makedirs(folder, exist_ok=True)
baton = FileBaton(os.path.join(folder, "lock"))
if baton.try_acquire():
    baton.release()
else:
    baton.wait()  # forever, where the lock is a dead build's
"""


def test_a_build_killed_midway_leaves_no_lock_that_stalls_the_next_build_of_its_source(evaluator, task, tmp_path):
    # torch's FileBaton waits forever on a lock left behind: the same source built again would time out,
    # and its verdict would blame the candidate. Left by a killed worker ...
    result = evaluator.evaluate(task, KILLED_MID_BUILD)
    assert result.verdict == "crash", result.to_json()
    assert list((evaluator.cache_dir / "sources").glob("*/torch_extensions/kernel_ext"))
    # ... or by a harness killed while its worker built (a regrade stopped by a machine's limit): the
    # lock is in the source's cache before its worker starts.
    text = WAITS_ON_BUILD_LOCK + "\n" + source(LEGITIMATE)
    (tmp_path / "candidate.py").write_text(text)
    stale = evaluator._sources.of(tmp_path / "candidate.py") / "torch_extensions" / "kernel_ext" / "lock"
    stale.parent.mkdir(parents=True, exist_ok=True)
    for built in (stale.parent.parent, stale.parent):
        built.chmod(0o777)  # as the worker that made them left them (it runs as nobody under root)
    stale.write_text("")
    after = evaluator.evaluate(task, text)
    assert after.verdict == "correct", after.to_json()


@pytest.mark.slow
def test_allocates_64gb_fails_and_the_next_evaluation_is_correct(planted, task, evaluator):
    result = planted["allocates_64gb"].result()
    assert result.verdict in ("runtime_error", "crash")
    assert "allocate" in result.reason
    after = evaluator.evaluate(task, source(LEGITIMATE))
    assert after.verdict == "correct", after.reason


def test_returns_first_output_is_incorrect_on_the_next_draw(planted):
    result = planted["returns_first_output"].result()
    assert result.verdict == "incorrect"
    assert "differs" in result.reason and "inputs from a secret seed" in result.reason


def test_caches_by_input_address_gains_nothing(planted):
    # Timed inputs get new contents (rotated) before every call, so the cache never hits: the
    # kernel is timed doing its work. A hitting cache measured hundreds of times eager.
    result = planted["caches_by_input_address"].result()
    assert result.verdict != "correct" or result.speedup_vs_eager < 50, result.to_json()


def test_forges_result_and_exits_is_not_correct(planted):
    # The candidate can write its worker's record, but the referee neither reads its time nor
    # believes a `correct` written before its own calls were done.
    result = planted["forges_result_and_exits"].result()
    assert result.verdict == "rejected", result.to_json()
    assert "forged record" in result.reason


def test_looks_for_api_keys_sees_none_of_the_parents(monkeypatch, task, evaluator):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    result = evaluator.evaluate(task, source("looks_for_api_keys"))
    assert result.verdict == "correct", result.reason


def test_patches_timers_is_rejected_naming_what_it_replaced(planted):
    # The timing module bound its clocks before the candidate loaded, and notices they were replaced
    # (the CPU's: torch.cuda.Event, which the candidate replaced too, is the GPU adapter's to watch).
    result = planted["patches_timers"].result()
    assert result.verdict == "rejected", result.to_json()
    assert "time.perf_counter" in result.reason and "time.monotonic" in result.reason


def test_works_after_return_is_rejected(planted):
    result = planted["works_after_return"].result()
    assert result.verdict == "rejected", result.to_json()
    assert "after forward returned" in result.reason


def test_leaves_a_daemon_gets_its_verdict_and_the_daemon_is_gone(planted, evaluator):
    result = planted["leaves_a_daemon"].result()
    assert result.verdict == "correct", result.reason  # the kernel itself is the legitimate one
    planted_in = [p.parent for p in evaluator.work_dir.rglob("daemon.pid")]
    assert planted_in, "the planted daemon never started"
    # Killed before the result was reported: the end of the worker's PID namespace (or the zygote's
    # reaping, where there is none). Its pid is its namespace's, so it is found by its folder (other
    # candidates' workers may be running in theirs meanwhile).
    worker_folders = tuple(str(folder) for folder in planted_in)
    for entry in Path("/proc").iterdir():
        try:
            cwd = os.readlink(entry / "cwd") if entry.name.isdigit() else ""
        except OSError:
            continue
        assert not cwd.startswith(worker_folders), f"process {entry.name} outlived its worker in {cwd}"


def test_the_references_compiler_caches_are_out_of_the_candidates_reach(task, evaluator):
    import os

    evaluator.reference(task)
    own = set(evaluator.platform.cache_dirs(evaluator.cache_dir / "reference").values())
    shared = set(evaluator.platform.cache_dirs(evaluator.cache_dir).values())
    assert own and not own & shared  # Inductor/Triton caches hold code the reference's worker runs
    if os.getuid() == 0:  # candidates run as nobody: the reference's caches are root's alone
        for folder in own:
            assert folder.stat().st_uid == 0 and folder.stat().st_mode & 0o777 == 0o700, folder


def test_a_task_whose_reference_output_is_constant_calls_nothing_correct(tmp_path, make_evaluator):
    constant = one_input_task(tmp_path, "zero_times_x", "x * 0.0", "torch.randn(256, 256)")
    result = make_evaluator().evaluate(resolve_one(constant), model_new("torch.zeros_like(x)"))
    assert result.verdict == "rejected", result.to_json()
    assert "nearly constant" in result.reason


def test_extreme_draws_of_an_input_viewed_with_gaps_keep_its_layout(tmp_path, make_evaluator):
    # A captured cache's slice: every other column of a buffer. The extreme draws (inputs x100 and
    # x0.01) once came out dense, no longer fit the region's slot, and the reference session failed
    # (on the H200, three of Qwen3.5's captured tasks).
    gaps = one_input_task(tmp_path, "double_every_other_column", "x * 2.0", "torch.randn(64, 256)[:, ::2]")
    result = make_evaluator(torch_ops="allow").evaluate(resolve_one(gaps), model_new("x + x"))
    # Judged on every draw, extreme ones included; then its PyTorch-only forward is what is wrong.
    assert result.verdict == "rejected" and "only PyTorch's" in result.reason, result.to_json()
    assert result.calls_checked >= 3


@pytest.mark.slow
def test_every_baseline_is_timed_once_per_task_and_the_gpu_libraries_without_a_gpu_are_skipped_with_a_reason(
    task, make_evaluator
):
    evaluator = make_evaluator(overrides=("platform.baselines=[eager,liger,flashinfer]",))
    result = evaluator.evaluate(task, source(LEGITIMATE))
    assert result.verdict == "correct", result.reason
    assert result.baselines["eager"] > 0 and result.speedups["eager"] == result.speedup_vs_eager
    for library in ("liger", "flashinfer"):
        assert result.baselines_skipped[library] == "runs on cuda only, not cpu", result.baselines_skipped
    assert "eager" in result.baselines_setup_s
    # The only one timed is the best there is, and the kernel is credited against it.
    assert result.best_baseline == "eager" and result.speedup_vs_best == result.speedup_vs_eager


def test_a_baseline_with_no_file_is_an_error_naming_the_known_ones(make_evaluator):
    from harness.errors import ForgeBenchError

    with pytest.raises(ForgeBenchError, match=r"baselines/tensorrt_llm\.py.*compile_max_autotune"):
        make_evaluator(overrides=("platform.baselines=[eager,tensorrt_llm]",))


def test_an_outputs_file_that_is_torn_or_forged_is_unreadable(tmp_path):

    from harness.evaluate import outputs

    path = tmp_path / "outputs.bin"
    calls = [[torch.arange(6.0).reshape(2, 3), torch.ones(5, dtype=torch.bfloat16)], "forward returned int"]
    outputs.write(path, calls)
    back = outputs.read(path, torch.device("cpu"))
    assert torch.equal(back[0][0], calls[0][0]) and torch.equal(back[0][1], calls[0][1]) and back[1] == calls[1]
    whole = path.read_bytes()
    for damaged in (whole[:-8], whole[:4], whole.replace(b'"float32"', b'"float99"'), b"\xff" * 64):
        path.write_bytes(damaged)
        with pytest.raises(outputs.UnreadableOutputs):
            outputs.read(path, torch.device("cpu"))


def test_busy_time_on_several_streams_counts_overlapping_work_once():
    # Kernels (start, end) in µs: two streams overlap from 5 to 10; a gap from 12 to 20 is idle.
    from harness.devices.cuda import union_length

    assert union_length([(20, 25), (0, 10), (5, 12), (21, 22)]) == 17
    assert union_length([]) == 0


def test_work_escaping_the_stream_is_judged_by_the_least_of_several_measurements(monkeypatch):
    # A host descheduled once while it waits (compilers beside the timing) reads as device time: on the
    # H200 an honest kernel read 0.264 ms against 0.121 ms with 16 builds beside it. Work that escapes
    # shows in every measurement.
    from harness.devices.cuda import CudaDevice

    device = CudaDevice()
    measured = iter([(0.01, 0.264), (0.01, 0.125), (0.01, 0.5)])
    monkeypatch.setattr(device, "wall_ms", lambda fn, inputs: next(measured))
    assert device.escaped_work(None, [], call_ms=0.121) is None
    measured = iter([(0.01, 0.264), (0.01, 0.31), (0.01, 0.29)])
    assert "busy 0.264 ms but its own stream only 0.121 ms" in device.escaped_work(None, [], call_ms=0.121)


RECORDS_ITS_NICENESS = """
import os

with open("niceness.txt", "w") as f:  # in the worker's own folder
    f.write(str(os.nice(0)))
"""


def test_a_build_worker_runs_at_a_lower_priority_than_a_timing(evaluator, task):
    # Regrade builds on every core while it times: a compiler must yield the cores a timing wants.
    from harness.evaluate.evaluator import BUILD_NICENESS

    base = os.nice(0)
    text = RECORDS_ITS_NICENESS + source(LEGITIMATE)
    assert evaluator.build(task, text) is None
    result = evaluator.evaluate(task, text)
    assert result.verdict == "correct", result.to_json()
    built = list((evaluator.work_dir / "builds" / task.id).glob("*/niceness.txt"))
    timed = list((evaluator.work_dir / "candidates" / task.id).glob("*/niceness.txt"))
    assert [int(p.read_text()) for p in built] == [min(base + BUILD_NICENESS, 19)]
    assert timed and int(timed[0].read_text()) == base


# Lazy outputs and behaving differently when observed (issue 15). Each defence has a
# planted candidate that only it stops: the audit cannot read names built at run time.


LAZY_OR_OBSERVING = [
    # (planted candidate, its verdict, fragments its reason must hold)
    ("returns_lazy_subclass", "rejected", ("Deferred", "plain torch.Tensor")),
    ("returns_plain_subclass", "rejected", ("Carrier",)),  # though its values are right
    # Every call is watched, so it never took its PyTorch path; asking at all is what it is named for.
    ("uses_torch_when_unobserved", "rejected", ("_len_torch_dispatch_stack", "asked whether it is observed")),
    ("asks_if_observed", "rejected", ("reads _len_torch_dispatch_stack", "line")),  # the source audit
    ("torch_on_a_thread", "rejected", ("aten.", "PyTorch compute ops")),  # the profiler on every thread
    # Found by a review that broke the first version of these defences (each got `correct` then).
    ("patches_the_harness", "rejected", ("changed the harness", "_torch_compute")),
    ("skips_work_when_timed", "incorrect", ("timed call",)),  # every timed call judged
    ("pops_the_recorder", "rejected", ("_pop_torch_dispatch_stack",)),
    ("torch_until_profiled", "rejected", ("PyTorch compute ops",)),  # the profiler warm from the start
]


@pytest.mark.parametrize(("name", "verdict", "fragments"), LAZY_OR_OBSERVING, ids=[c[0] for c in LAZY_OR_OBSERVING])
def test_a_lazy_or_observing_planted_candidate_gets_its_verdict(planted, name, verdict, fragments):
    result = planted[name].result()
    assert result.verdict == verdict, result.to_json()
    for fragment in fragments:
        assert fragment in result.reason, result.to_json()


def test_where_eagers_worker_cannot_be_observed_the_candidates_census_stays_and_the_record_says_so(
    tmp_path, make_evaluator, monkeypatch
):
    from harness.evaluate import referee

    class RefusedForEager(referee.Census):
        def __init__(self, pid, own_roots):
            if not own_roots:  # eager's worker: no library of a candidate's to attribute
                raise referee.CensusUnavailable("perf_event_open refused (planted)")
            super().__init__(pid, own_roots)

    monkeypatch.setattr(referee, "Census", RefusedForEager)
    task = one_input_task(tmp_path, "double", "x * 2.0", "torch.randn(256, 256)")
    result = make_evaluator(torch_ops="allow").evaluate(resolve_one(task), model_new("x + x"))
    if "census" in result.checks_skipped:
        pytest.skip(f"no census here: {result.checks_skipped['census']}")
    assert result.census["samples"] > 0 and "eager_samples" not in result.census, result.census
    assert "planted" in result.checks_skipped["census_of_eager"], result.checks_skipped
