"""Task discovery, selection and validation: broken task files get one sentence with file, field, fix."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.errors import ForgeBenchError
from harness.tasks import TASKS_ROOT, discover, load_task_dir, resolve_one, select, set_name, survey
from harness.trace import signature

KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "kernelbench"
REFERENCE = (TASKS_ROOT / "handwritten" / "softmax_rows" / "reference.py").read_text()


def make_task(root: Path, yaml_text: str, name: str = "demo", reference: str = REFERENCE) -> Path:
    folder = root / "src" / name
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(yaml_text)
    (folder / "reference.py").write_text(reference)
    return folder


def test_handwritten_tasks_are_discovered_with_their_metadata():
    tasks = {t.id: t for t in discover()}
    assert {
        "softmax_rows",
        "rmsnorm_qwen",
        "groupnorm_sd_vae",
        "layernorm_sd3",
        "gelu_tanh_sd3",
        "silu_and_mul_qwen",
    } <= set(tasks)
    assert tasks["rmsnorm_qwen"].operator == "rms_norm"
    assert tasks["rmsnorm_qwen"].bytes_moved > 0


def test_every_committed_task_traces_on_meta_tensors():
    for task in discover():
        assert signature(task).input_shapes, task.id


def test_kernelbench_file_is_a_task_unchanged():
    task = resolve_one(str(KERNELBENCH / "level1" / "23_Softmax.py"))
    assert task.id == "23_Softmax"
    sig = signature(task)
    assert sig.input_shapes == [[4096, 393216]]  # traced on meta: no 6 GB allocated
    assert sig.operator == "aten._softmax"


def test_a_stateless_torch_reference_is_restated_as_the_aten_calls_it_makes():
    """What the prompt shows beside a torch reference (harness/trace.py): valid Python of aten calls
    for every stateless KernelBench level-1 problem, none for one holding weights."""
    found = {p.stem: signature(resolve_one(str(p))) for p in sorted((KERNELBENCH / "level1").glob("*.py"))}
    restated = {name: sig.aten_graph for name, sig in found.items() if sig.aten_graph}
    assert len(restated) >= 50 and not [name for name in restated if "conv" in name]
    for source in restated.values():
        ast.parse(source)
    assert "t0 = torch.ops.aten.leaky_relu.default(x0)\n" in restated["20_LeakyReLU"]
    # max.dim returns values and indices; the problem returns the values, and the unread item goes.
    assert "t1 = t0[0]" in restated["49_Max_reduction_over_a_dimension"]
    assert "t0[1]" not in restated["49_Max_reduction_over_a_dimension"]


def test_kernelbench_folder_selects_every_file():
    assert len(select(str(KERNELBENCH / "level2"))) == 100


def test_select_by_glob_and_source():
    assert [t.id for t in select("rmsnorm_q*")] == ["rmsnorm_qwen"]
    assert len(select("handwritten")) == len(select("handwritten/*"))


def test_unknown_pattern_says_how_to_list_tasks():
    with pytest.raises(ForgeBenchError, match="forgebench tasks list"):
        select("no_such_task")


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("id: demo\noperator: [unclosed", "not valid YAML at line"),
        ("operator: aten._softmax\n", "field 'id' is missing"),
        ("id: demo\noperator: softmax\ncall_count: many\n", "field 'call_count' is 'many'; write a whole number there"),
        ("id: other\noperator: softmax\n", "folder is 'demo'"),
        ("id: demo\noperator: softmax\nshape: [1]\n", "unknown field 'shape'"),
        ("- just\n- a list\n", "must be a mapping"),
    ],
    ids=["yaml_syntax", "missing_id", "wrong_type", "id_mismatch", "unknown_field", "not_mapping"],
)
def test_broken_task_yaml_names_file_and_field(tmp_path, yaml_text, expected):
    folder = make_task(tmp_path, yaml_text)
    with pytest.raises(ForgeBenchError, match=expected) as info:
        load_task_dir(folder)
    assert str(folder / "task.yaml") in str(info.value)


def test_reference_without_model_is_reported(tmp_path):
    folder = make_task(tmp_path, "id: demo\noperator: x\n", reference="def get_inputs():\n    return []\n")
    with pytest.raises(ForgeBenchError, match="defines no Model, get_init_inputs"):
        signature(load_task_dir(folder))


def test_duplicate_ids_are_reported(tmp_path):
    make_task(tmp_path, "id: demo\noperator: x\n")
    other = tmp_path / "other" / "demo"
    other.mkdir(parents=True)
    for name in ("task.yaml", "reference.py"):
        (other / name).write_text((tmp_path / "src" / "demo" / name).read_text())
    tasks, broken = survey(tmp_path)
    assert tasks == [] and len(broken) == 2 and all("used by both" in b.reason for b in broken)
    with pytest.raises(ForgeBenchError, match="used by both"):
        select("demo", tmp_path)


@pytest.mark.parametrize("model", ["resnet50", "sd35", "gemma4", "qwen35"])
def test_each_captured_set_covers_its_model_and_its_suite_selects_exactly_it(model):
    repo = Path(__file__).resolve().parents[1]
    manifest = yaml.safe_load((repo / "tasks" / model / "manifest.yaml").read_text())
    assert manifest["timing"]["device"] == "cuda" and manifest["coverage"] >= 0.9  # of the H200's time
    listed = {t["id"] for t in manifest["tasks"]} | {t["id"] for t in manifest["fused_tasks"]}
    collect = [sys.executable, "-m", "pytest", str(repo / "suite"), f"--tasks={model}", "--collect-only", "-q"]
    done = subprocess.run([*collect, "-p", "no:cacheprovider"], cwd=repo, capture_output=True, text=True, timeout=300)
    selected = {line.split("[", 1)[1].rstrip("]") for line in done.stdout.splitlines() if "::test_kernel[" in line}
    assert selected == listed, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_task_set_given_as_paths_goes_by_their_names(tmp_path, monkeypatch):
    """As the suite names a `--tasks` spec in its task_set tag: each path by its own name, the rest as given."""
    folder = tmp_path / "captured" / "relu_64x256"
    folder.mkdir(parents=True)
    (tmp_path / "19_ReLU.py").write_text("")
    monkeypatch.chdir(tmp_path / "captured")
    patterns = [str(folder), "softmax_rows", "kernelbench/level1/*"]
    assert set_name(patterns) == "relu_64x256,softmax_rows,kernelbench/level1/*"
    assert set_name("../19_ReLU.py") == "19_ReLU.py"
    assert set_name(".") == "captured"  # a relative path by the folder it names
