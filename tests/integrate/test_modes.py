"""Execution modes (modes.py, docs/e2e-modes.md): a mode this device cannot run is refused with its
reason, a kernel that breaks a mode is refused in that mode alone, and the record, the e2e table,
the leaderboard and the bundle say which mode each figure is of."""

import json

import pytest
import torch

from harness import devices
from harness.errors import ForgeBenchError
from harness.integrate import e2e_report, guard, model_run, modes
from harness.integrate.e2e_record import E2EResult, GuardDecision, Mode, ModeResult
from tests.integrate.test_graph_patch import CHAIN, _kernel
from tests.integrate.test_model_run import CHAIN as ROWS_CHAIN
from tests.integrate.test_model_run import FUSED


def _request(tmp_path, modes_asked: list[str]) -> dict:
    tasks = []
    for rows in (8, 4):
        reference, kernel = tmp_path / f"chain{rows}.py", tmp_path / f"kernel{rows}.py"
        reference.write_text(ROWS_CHAIN.replace("{rows}", str(rows)))
        kernel.write_text(FUSED)
        tasks.append({"id": f"chain{rows}", "reference_path": str(reference), "kernel_path": str(kernel)})
    return {
        "model": "tests.integrate.test_model_run:build_two_chains",
        "device": "cpu",
        "tasks": tasks,
        "budget_ms": 10.0,
        "kernel_budget_ms": 5.0,
        "result_path": str(tmp_path / "model_run.json"),
        "modes": modes_asked,
    }


def test_cuda_graphs_on_a_cpu_are_refused_with_their_reason_and_the_record_says_which_mode(tmp_path):
    found = model_run.run(_request(tmp_path, ["eager", "cuda_graph", "compile_cuda_graph"]))
    record = E2EResult.read(json.loads(json.dumps(found)))  # as e2e.json is read back
    for name in ("cuda_graph", "compile_cuda_graph"):
        assert record.modes[name].refused == f"{name} needs CUDA graphs, and the cpu device cannot capture them"
    assert record.verified_modes == [Mode.EAGER]
    eager = record.mode("eager")
    assert (
        eager.timings["base"] == record.timings["eager"] and eager.timings["patched"] == record.timings["patched_eager"]
    )
    told = e2e_report.describe({**found, "model": "two_chains", "run_id": "r"})
    assert "refused: cuda_graph needs CUDA graphs, and the cpu device cannot capture them" in told, told
    assert "alone vs eager" in told and "realized" in told and "kept in" in told
    # The default: the modes the device runs (a CPU: eager and torch.compile).
    assert modes.supported(devices.of("cpu")) == [Mode.EAGER, Mode.COMPILE]


class _Runners:
    """A mode's runners with the compile left out: the kernel that syncs fails as a capture would."""

    mode = Mode.COMPILE

    def __init__(self, candidates):
        self.candidates = candidates

    def base(self):
        return lambda: 1.0

    def patched(self, kernels):
        if any(k.task_id == "syncs" for k in kernels):
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        return (lambda: 1.0), None, 1.0, {k.task_id: 1 for k in kernels}


def test_a_kernel_that_breaks_a_mode_is_refused_in_that_mode_alone_with_its_reason(tmp_path):
    kernels = [_kernel(tmp_path, CHAIN, "syncs"), _kernel(tmp_path, CHAIN, "fine")]
    decisions = [guard.Decision(k.task_id, "kept", op_ms=1.0, kernel_ms=0.5) for k in kernels]
    spread = lambda ms: {"median_ms": ms, "p20_ms": ms, "p80_ms": ms}
    together = lambda fns: {"eager": spread(2.0), "base": spread(1.0), "patched": spread(0.5)}
    weigh = modes.ModeWeighing(_Runners(kernels), lambda: 1.0, together, lambda a, b: {}, lambda what: None)
    found = weigh.weigh(decisions)
    assert found.decisions == {"syncs": GuardDecision.REFUSED_IN_MODE, "fine": GuardDecision.KEPT}
    assert found.reasons["syncs"] == (
        "under compile it fails: RuntimeError: CUDA error: operation not permitted when stream is capturing"
    )
    assert found.kept == ["fine"] and found.speedup == 2.0 and found.base_vs_eager == 2.0
    assert all(d.kept for d in decisions), "the eager decisions are the eager mode's: untouched"


def test_a_mode_is_named_in_the_leaderboard_rows_and_a_bundle_refuses_a_mode_it_was_not_verified_in(tmp_path):
    from leaderboard.e2e import _mode_rows

    refused = ModeResult(
        Mode.CUDA_GRAPH, refused="cuda_graph needs CUDA graphs, and the cpu device cannot capture them"
    )
    timed = {"eager": {"median_ms": 2.0}, "base": {"median_ms": 1.0}, "patched": {"median_ms": 0.8}}
    compiled = ModeResult(Mode.COMPILE, kept=["k"], timings=timed, predicted_speedup=1.5)
    record = E2EResult(modes={"cuda_graph": refused, "compile": compiled})
    rows = {row["mode"]: row for row in _mode_rows(record, {"e2e_speedup_vs_eager": 1.1})}
    assert rows["cuda_graph"]["refused"].startswith("cuda_graph needs CUDA graphs")
    assert rows["compile"]["mode_speedup"] == pytest.approx(1.25) and rows["compile"]["mode_vs_eager"] == 2.0
    assert rows["compile"]["realization"] == pytest.approx(0.5)  # a 25% gain of a predicted 50%
    # A record of before modes (no artifact, or a dict of the old shape) is its eager row.
    assert _mode_rows(None, {"e2e_speedup_vs_eager": 1.1}) == [{"e2e_speedup_vs_eager": 1.1, "mode": "eager"}]

    from harness.integrate.bundle import SUMS, _sha, apply

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    manifest = {"format": 1, "model": "m", "environment": {}, "kernels": [], "modes": ["eager"]}
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    (bundle / SUMS).write_text(f"{_sha(bundle / 'manifest.json')}  manifest.json\n")
    with pytest.raises(ForgeBenchError, match=r"mode='compile'\): bundle .* was verified in eager only"):
        apply(torch.nn.Linear(2, 2), bundle, mode="compile")


def test_a_modes_prediction_takes_the_captured_time_over_the_modes_own_not_a_drifting_eagers():
    # The H200's ResNet-50 record (docs/results.md): eager beside the graph replays read 8.88 ms (its
    # host time drifted; elsewhere in the run 4.43 ms), the graph 3.64 ms; the capture's forward is
    # 4.42 ms of GPU time. Scaling the captured shares by eager over the mode predicted 1.30x for a
    # measured 1.16x; by the capture's time over the mode's, 1.13x.
    from harness.integrate.e2e import captured_ms
    from harness.tasks import resolve_one

    task = resolve_one("resnet50_fused3_native_batch_norm_relu_32x256x56x56_67bb08")
    assert captured_ms([task], "cuda") == pytest.approx(4.422768)
    assert captured_ms([task], "cpu") is None  # timed on another kind of device: unknown here
    run = model_run.ModelRun.__new__(model_run.ModelRun)
    found = ModeResult(Mode.CUDA_GRAPH, timings={"eager": {"median_ms": 8.88}, "base": {"median_ms": 3.64}})
    run.request = {"captured_ms": 4.42}
    assert run.mode_scale(found) == pytest.approx(4.42 / 3.64)
    run.request = {"captured_ms": None}  # a changed workload, or no manifest: eager over the mode
    assert run.mode_scale(found) == pytest.approx(8.88 / 3.64)
