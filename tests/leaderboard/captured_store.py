"""A store laid out as docs/records.md says: two suite runs over four captured resnet50 tasks (one
fused), a KernelBench-style run without shares, and e2e runs of resnet50 with execution modes: the
records the predicted and e2e views read, written by hand so the figures can be worked out."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from harness.integrate.e2e_record import E2EResult, Mode, ModeResult
from harness.record import mlflow_client

CAPTURED, KB = "rn@aaaaaaaaaaaa", "kb@bbbbbbbbbbbb"
H200 = "NVIDIA H200"
BN, RELU, CONV, FUSED = "resnet50_bn", "resnet50_relu", "resnet50_conv", "resnet50_fused2_bn_relu"
# tags, metrics: bn 2x on 30% of the time; relu correct but slower (the guard keeps PyTorch's);
# conv wrong; the fused bn -> relu 4x on 20%, its calls the bn and relu groups' own.
TASKS = {
    BN: ({"operator": "aten.native_batch_norm"}, {"time_share": 0.3, "correct": 1.0, "speedup_vs_eager": 2.0}),
    RELU: ({"operator": "aten.relu"}, {"time_share": 0.1, "correct": 1.0, "speedup_vs_eager": 0.5}),
    CONV: ({"operator": "aten.convolution"}, {"time_share": 0.4, "correct": 0.0}),
    FUSED: (
        {"operator": "native_batch_norm+relu", "members": "aten.native_batch_norm.default,aten.relu.default"},
        {"time_share": 0.2, "correct": 1.0, "speedup_vs_eager": 4.0},
    ),
}
# Amdahl by hand. "all": bn saves 0.3 x 1/2 = 0.15; the fused kernel only what it saves beyond bn's
# 2x on its 20%: 0.2/2 x (1 - 2/4) = 0.05; 1 / (1 - 0.2) = 1.25. Counted as if its calls were no
# other task's: 0.15 + 0.2 x 3/4 = 0.30, 1.43. "fused": nothing beats it, 0.2 x 3/4 = 0.15, 1/0.85.
PREDICTED_EAGER = {"all": 1.25, "fused": 1 / 0.85}
# Under torch.compile, which alone halves the model's time here: every share doubles.
PREDICTED_COMPILE = {"all": 1 / (1 - 0.3 - 0.1), "fused": 1 / (1 - 0.3)}
REFUSED = "cuda_graph needs CUDA graphs, and the cpu device cannot capture them"


def _ms(day: str) -> int:
    return int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() * 1000)


def _suite(client, experiment: str, label: str, task_set: str, tasks: dict, day: str) -> str:
    tags = {"agent": "mcts", "model": f"openai/{label}", "model.label": label, "platform": "cuda", "device": H200}
    tags |= {"suite": task_set.split("@")[0], "task_set": task_set}
    parent = client.create_run(
        experiment, start_time=_ms(day), tags={**tags, "forgebench.kind": "suite", "task_count": str(len(tasks))}
    ).info.run_id
    for task, (task_tags, metrics) in tasks.items():
        run = client.create_run(
            experiment,
            start_time=_ms(day),
            tags={**tags, "source": task.split("_")[0], **task_tags, "task": task, "forgebench.kind": "task"}
            | {"mlflow.parentRunId": parent},
        ).info.run_id
        for key, value in metrics.items():
            client.log_metric(run, key, value)
        client.set_terminated(run)
    client.set_terminated(parent)
    return parent


def _timed(eager: float, base: float, patched: float) -> dict:
    return {k: {"median_ms": v} for k, v in (("eager", eager), ("base", base), ("patched", patched))}


def _e2e(client, experiment: str, source_run: str, day: str, device: str, modes: dict, overrides: str = "") -> str:
    tags = {"forgebench.kind": "e2e", "model": "resnet50", "source_run": source_run, "device": device}
    tags |= {"agent": "mcts", "model.label": "all", "platform": "cuda", "overrides": overrides}
    run = client.create_run(experiment, start_time=_ms(day), tags=tags).info.run_id
    eager = modes["eager"]
    client.log_metric(run, "e2e_speedup_vs_eager", eager.speedup)
    client.log_metric(run, "kernels_kept", len(eager.kept))
    client.log_metric(run, "predicted_speedup", eager.predicted_speedup)
    record = E2EResult(model="resnet50", source_run=source_run, modes={m.mode.value: m for m in modes.values()})
    client.log_dict(run, record.to_dict(), "e2e.json")
    client.set_terminated(run)
    return run


def captured_store(folder: Path) -> dict[str, str]:
    """The store under folder/mlflow.db; returns its URI ("uri") and the runs' ids by name."""
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = mlflow_client(uri)
    experiment = client.create_experiment("forgebench", artifact_location=(folder / "artifacts").as_uri())
    # The second provider solved only the fused task; the KernelBench-style task has no share.
    only_fused = {
        t: (tags, m if t == FUSED else {"time_share": m["time_share"], "correct": 0.0})
        for t, (tags, m) in TASKS.items()
    }
    bare = {"t1": ({"source": "kernelbench"}, {"correct": 1.0, "speedup_vs_eager": 3.0})}
    ids = {
        "all": _suite(client, experiment, "all", CAPTURED, TASKS, "2026-12-01"),
        "fused": _suite(client, experiment, "fused", CAPTURED, only_fused, "2026-12-02"),
        "kb": _suite(client, experiment, "all", KB, bare, "2026-12-03"),
    }
    modes = {
        "eager": ModeResult(Mode.EAGER, kept=[BN], timings=_timed(10, 10, 8), predicted_speedup=1.2),
        "compile": ModeResult(Mode.COMPILE, kept=[BN, FUSED], timings=_timed(10, 5, 4), predicted_speedup=1.5),
        "cuda_graph": ModeResult(Mode.CUDA_GRAPH, refused=REFUSED),
    }
    ids["e2e"] = _e2e(client, experiment, ids["all"], "2026-12-04", H200, modes)
    # Newer, but of another workload (fewer layers) and on another device: neither says what
    # torch.compile alone gives the captured resnet50 on the H200.
    changed = {**modes, "compile": ModeResult(Mode.COMPILE, timings=_timed(10, 2.5, 2.5))}
    ids["e2e_changed"] = _e2e(client, experiment, ids["all"], "2026-12-05", H200, changed, "capture.layers=2")
    ids["e2e_cpu"] = _e2e(client, experiment, ids["all"], "2026-12-06", "cpu", changed)
    return {**ids, "uri": uri}
