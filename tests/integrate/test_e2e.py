"""`forgebench e2e`, `export` and `apply` on the CPU, end to end: a small model of our own
(tests/e2e_fixture_model.py) captured here, a suite run of the offline model on three of its tasks,
then the kernels back in the model behind the guard. Planted kernels take each of the guard's paths:
one faster in place (kept), one right on the task's random inputs and wrong on the model's own
activations (rejected, the model's output stays eager's), one slower (not kept); and an installed
bundle sends a call at a shape it was not captured at to PyTorch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.errors import ForgeBenchError
from harness.integrate import apply
from harness.record import mlflow_client
from tests import e2e_fixture_model

# Module fixtures run whole suites and e2e runs (a minute or more): CI runs these after the fast set.
pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[2]
HERE = Path(__file__).parent
SPEC = "tests.e2e_fixture_model:build"
MODEL = "e2e_fixture_model"
ERFINV, RELU, SIGMOID = "erfinv_64x256_3df0ce", "relu_64x256_f1ada6", "sigmoid_64x256_11153f"
CHAIN = "fused5_tanh_sigmoid_64x256_6a938e"  # tanh, cast, erfinv, cast, sigmoid


def forgebench(
    *args: str, env: dict, timeout: int = 600, module: str = "forgebench.cli"
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *module.split(), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    root.chmod(0o711)  # the suite's workers, as nobody, pass through
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{root / 'mlflow.db'}"}
    captured = forgebench(
        "capture",
        "--model",
        SPEC,
        "--device",
        "cpu",
        "--out",
        str(root / "tasks"),
        "--budget-ms",
        "10",
        "--min-share",
        "0.0001",
        "--coverage",
        "1",
        env=env,
    )
    assert captured.returncode == 0, captured.stderr
    folder = root / "tasks" / MODEL
    ids = {name: f"{MODEL}_{name}" for name in (ERFINV, RELU, SIGMOID, CHAIN)}
    for task_id in ids.values():
        assert (folder / task_id).is_dir(), sorted(p.name for p in folder.iterdir())
    tasks = "[" + ",".join(str(folder / task_id) for task_id in ids.values()) + "]"
    suite = forgebench(
        "suite/",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--tasks={tasks}",
        "--agent=oneshot",
        "--platform=cpu",
        "--override",
        f"run_root={root / 'runs'}",
        env=env,
        module="pytest",
    )
    assert "passed" in suite.stdout, suite.stdout[-3000:] + suite.stderr[-2000:]
    run_dir = next((root / "runs").glob("*/*"))
    out = root / "e2e"
    planted = [
        f"{ids[ERFINV]}={HERE / 'fast_erfinv.py'}",
        f"{ids[RELU]}={HERE / 'relu_assumes_positive.py'}",
        f"{ids[SIGMOID]}={HERE / 'slow_sigmoid.py'}",
        f"{ids[CHAIN]}={HERE / 'fast_tanh_erfinv_sigmoid.py'}",
    ]
    e2e = forgebench(
        "e2e",
        "--model",
        SPEC,
        "--run",
        str(run_dir),
        "--device",
        "cpu",
        "--out",
        str(out),
        "--budget-ms",
        "900",  # a variant's timing: at 300 ms CI's load once read a chain saving 0.7 ms a forward as slower
        *[a for p in planted for a in ("--kernel", p)],
        env=env,
    )
    assert e2e.returncode == 0, e2e.stderr[-3000:]
    return {
        "root": root,
        "env": env,
        "ids": ids,
        "run_dir": run_dir,
        "out": out,
        "stdout": e2e.stdout,
        "found": json.loads((out / "e2e.json").read_text()),
        "folder": folder,
    }


def decisions(world) -> dict[str, dict]:
    return {d["task_id"]: d for d in world["found"]["decisions"]}


def test_the_guard_keeps_the_faster_kernel_and_rejects_the_wrong_and_the_slower(world):
    by_task, ids = decisions(world), world["ids"]
    assert by_task[ids[ERFINV]]["decision"] == "kept", by_task[ids[ERFINV]]
    assert by_task[ids[ERFINV]]["in_place_speedup"] > 1
    assert by_task[ids[RELU]]["decision"] == "incorrect_in_model", by_task[ids[RELU]]
    assert "model's own activations" in by_task[ids[RELU]]["reason"]
    assert by_task[ids[SIGMOID]]["decision"] == "slower_in_place", by_task[ids[SIGMOID]]
    # The fused chain's kernel is judged on the chain's own activations, and so is the erfinv
    # inside it, recorded in a pass of its own; in the model the chain takes the whole subgraph.
    assert by_task[ids[CHAIN]]["decision"] == "kept", by_task[ids[CHAIN]]
    assert by_task[ids[CHAIN]]["calls_checked"] == 1 and by_task[ids[ERFINV]]["calls_checked"] == 1
    assert world["found"]["hits_per_forward"] == {ids[CHAIN]: 1}
    # The rejected kernels never ran in the model: its output is eager's (erfinv in fp32 rounds alike).
    assert world["found"]["max_output_error"] == 0.0
    assert "2 kernels kept, 2 not" in world["stdout"]
    # Under torch.compile (a mode of its own, the CPU's default modes being eager and compile), the
    # guard weighs the same kernels against torch.compile alone: the chain's kernel an opaque op to
    # Inductor, called in place with the output unchanged where it is kept there.
    compiled = world["found"]["modes"]["compile"]
    assert compiled["refused"] is None and compiled["decisions"][ids[CHAIN]] in ("kept", "slower_in_model")
    if compiled["kept"]:
        assert compiled["hits_per_forward"] == {ids[CHAIN]: 1} and compiled["agreement"]["max_output_error"] == 0.0
    assert compiled["versus_base"] in ("faster", "tie", "slower") and "\ncompile " in world["stdout"]
    # The guard's promise: the patched model is not slower than eager beyond the timing spread.
    assert world["found"]["patched_vs_eager"] in ("faster", "tie"), world["found"]["timings"]


def test_the_wrong_relu_is_correct_on_the_task_s_own_random_inputs(world):
    task = world["folder"] / world["ids"][RELU]
    graded = forgebench(
        "eval", "--task", str(task), "--candidate", str(HERE / "relu_assumes_positive.py"), "--json", env=world["env"]
    )
    assert json.loads(graded.stdout)["verdict"] == "correct", graded.stdout[-2000:]


def test_the_e2e_run_is_recorded_with_its_decisions(world):
    client = mlflow_client(world["env"]["MLFLOW_TRACKING_URI"])
    run = client.get_run(world["found"]["run_id"])
    assert run.data.tags["forgebench.kind"] == "e2e" and run.data.tags["model"] == MODEL
    metrics = run.data.metrics
    for name in (
        "e2e_speedup_vs_eager",
        "predicted_speedup",
        "share_of_time_replaced",
        "kernels_kept",
        "kernels_rejected",
        "max_output_error",
        "patch_overhead_us_per_call",
        "graph_only_ms",
    ):
        assert name in metrics, sorted(metrics)
    assert metrics["kernels_kept"] == 2 and metrics["kernels_rejected"] == 2
    assert 0 < metrics["share_of_time_replaced"] < 1
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"e2e.json", "decisions.json"} <= artifacts
    board = forgebench("leaderboard", "--e2e", "--format", "json", env=world["env"])
    rows = json.loads(board.stdout)[0]["rows"]
    assert rows[0]["model"] == MODEL and rows[0]["kernels_kept"] == 2 and rows[0]["e2e_speedup_vs_eager"] > 0
    table = forgebench("leaderboard", "--e2e", env=world["env"]).stdout
    assert "e2e_speedup_vs_eager" in table  # an LLM's columns, and a changed workload's, only where there are any
    assert "prefill" not in table and "overrides" not in table


def test_a_suite_run_of_a_named_task_set_gives_its_tasks(world):
    # A run of `--tasks=sd35-e2e` is tagged with the set's name, which is no task pattern: e2e reads
    # the patterns from the config the suite recorded.
    from harness.integrate.e2e import suite_tasks

    client = mlflow_client(world["env"]["MLFLOW_TRACKING_URI"])
    suite = client.get_run(client.get_run(world["found"]["run_id"]).data.tags["source_run"])
    assert [Path(p).name for p in suite_tasks(client, suite)] == list(world["ids"].values())
    named = client.create_run(suite.info.experiment_id, tags={"forgebench.kind": "suite", "suite": "sd35-e2e"})
    config = {"tasks": None, "suite": {"name": "sd35-e2e", "tasks": ["sd35_mul_*"]}}
    client.log_dict(named.info.run_id, config, "config.json")
    assert suite_tasks(client, named) == ["sd35_mul_*"]
    bare = client.create_run(suite.info.experiment_id, tags={"forgebench.kind": "suite", "suite": "x"})
    with pytest.raises(ForgeBenchError, match="no readable config"):
        suite_tasks(client, bare)


@pytest.fixture(scope="module")
def exported(world):
    """`forgebench export` of the world's run, made once for the tests that read the bundle, whichever
    xdist worker runs each."""
    bundle = world["root"] / "bundle"
    made = forgebench("export", "--run", str(world["run_dir"]), "--model", SPEC, str(bundle), env=world["env"])
    return bundle, made


def test_export_takes_the_suite_runs_id_as_the_leaderboard_shows_it(world):
    from harness.record import mlflow_client

    client = mlflow_client(world["env"]["MLFLOW_TRACKING_URI"])
    suite_id = client.get_run(world["found"]["run_id"]).data.tags["source_run"]
    bundle = world["root"] / "bundle-by-prefix"
    made = forgebench("export", "--run", suite_id[:8], "--model", SPEC, str(bundle), env=world["env"])
    assert made.returncode == 0, made.stderr
    assert (bundle / "manifest.json").is_file()


def test_an_exported_bundle_applies_and_an_unseen_shape_falls_back(world, exported):
    bundle, made = exported
    assert made.returncode == 0, made.stderr
    manifest = json.loads((bundle / "manifest.json").read_text())
    ids = world["ids"]
    assert sorted(k["task_id"] for k in manifest["kernels"]) == sorted([ids[ERFINV], ids[CHAIN]])
    model, (x,) = e2e_fixture_model.build()
    small = e2e_fixture_model.inputs(rows=32)
    with torch.no_grad():
        eager, eager_small = model(x), model(small)
        installed = apply(model, bundle)
        assert torch.equal(installed(x), eager)
        assert installed.patch.hits == {ids[CHAIN]: 1}
        # Half the rows: shapes the tasks were never captured at go to PyTorch (the erfinv and
        # the sigmoid, the two kernels' last calls, are left as they are).
        assert torch.equal(installed(small), eager_small)
        assert installed.patch.hits == {ids[CHAIN]: 1} and installed.patch.unmatched == 2
        # Loading it wrote nothing into it (no __pycache__), so it applies again.
        assert torch.equal(apply(model, bundle)(x), eager)


def test_a_bundle_with_a_flipped_byte_or_from_elsewhere_is_refused(exported, tmp_path):
    bundle, made = exported
    assert made.returncode == 0, made.stderr
    model, (x,) = e2e_fixture_model.build()
    flipped = tmp_path / "flipped"
    subprocess.run(["cp", "-r", str(bundle), str(flipped)], check=True)
    kernel = next((flipped / "kernels").glob("*.py"))
    data = bytearray(kernel.read_bytes())
    data[10] ^= 0x01
    kernel.write_bytes(bytes(data))
    with pytest.raises(ForgeBenchError, match="does not match its checksum"):
        apply(model, flipped)

    outside = tmp_path / "outside"
    subprocess.run(["cp", "-r", str(bundle), str(outside)], check=True)
    manifest = json.loads((outside / "manifest.json").read_text())
    manifest["kernels"][0]["kernel"] = "../elsewhere.py"
    (outside / "manifest.json").write_text(json.dumps(manifest))
    from harness.integrate.bundle import SUMS, _sha

    files = sorted(p for p in outside.rglob("*") if p.is_file() and p.name != SUMS)
    (outside / SUMS).write_text("".join(f"{_sha(p)}  {p.relative_to(outside)}\n" for p in files))
    with pytest.raises(ForgeBenchError, match="not a file inside the bundle"):
        apply(model, outside)

    elsewhere = tmp_path / "elsewhere"
    subprocess.run(["cp", "-r", str(bundle), str(elsewhere)], check=True)
    manifest = json.loads((elsewhere / "manifest.json").read_text())
    manifest["environment"]["torch"] = "1.0.0"
    (elsewhere / "manifest.json").write_text(json.dumps(manifest))
    from harness.integrate.bundle import SUMS, _sha

    files = sorted(p for p in elsewhere.rglob("*") if p.is_file() and p.name != SUMS)
    (elsewhere / SUMS).write_text("".join(f"{_sha(p)}  {p.relative_to(elsewhere)}\n" for p in files))
    with pytest.raises(ForgeBenchError, match="made elsewhere"):
        apply(model, elsewhere)
    with torch.no_grad():
        installed = apply(model, elsewhere, example_inputs=(x,), reverify=True)
        # Checked again on this model's activations: right, and kept unless this loaded machine's
        # timing puts it within the op's spread (then it is left out, and the model is eager's).
        assert {d.decision for d in installed.decisions} <= {"kept", "slower_in_place"}
        assert torch.equal(installed(x), model(x))
    assert bool(installed.patch.hits) == any(d.kept for d in installed.decisions)
    assert (installed.run is model) == (not any(d.kept for d in installed.decisions))  # nothing kept: as it is


def test_e2e_names_what_is_wrong_with_its_arguments(world, monkeypatch, capsys):
    from forgebench.cli import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", world["env"]["MLFLOW_TRACKING_URI"])
    run_dir = str(world["run_dir"])
    for args, sentence in [
        (["--model", SPEC, "--run", "no-such-run"], "no suite run's id starts with 'no-such-run'"),
        (["--model", "resnet50", "--run", run_dir], "has no task captured from 'resnet50'"),
        (["--model", SPEC, "--run", world["found"]["run_id"]], "is a e2e run, not a suite run"),
        (["--model", SPEC, "--run", run_dir, "--kernel", "nope"], "TASK_ID=FILE.py"),
        (["--model", SPEC, "--run", run_dir, "--kernel", "no_such_task=x.py"], "no task of this model has that id"),
        (["--model", SPEC, "--run", run_dir, "--timeout-s", "0"], "--timeout-s 0.0: give a number of seconds"),
        (["--model", SPEC, "--run", run_dir, "--override", "capture.workload.steps=1"], "a module:factory model"),
        # A model run that outlasts its limit is stopped, and the sentence says how to give it longer.
        (["--model", SPEC, "--run", run_dir, "--timeout-s", "2"], "took over 2 s and was stopped"),
    ]:
        assert main(["e2e", *args]) == 2, args
        assert sentence in capsys.readouterr().err, args
