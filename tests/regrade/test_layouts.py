"""Published sets read as their systems lay them out (harness/regrade/layouts.py): KernelBench's runs
layout and its leaderboard's, each solution with its problem, model and claim; bad input is one
sentence and exit status 2. Nothing here is evaluated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.errors import ForgeBenchError
from harness.regrade.layouts import read
from tests.test_suite import forgebench

SETS = Path(__file__).parent / "sets"
RUNS, BOARD, PROBLEMS = SETS / "kernelbench_runs", SETS / "kernelbench_leaderboard", SETS / "problems"


def _by_key(published) -> dict:
    return {s.key: s for s in published.solutions}


def test_the_runs_layout_names_each_model_by_its_folder_and_reads_claims_from_eval_results():
    published = read(RUNS, "auto", PROBLEMS)
    assert published.layout == "runs" and published.set_name == "level1"
    found = _by_key(published)
    relu = found["alpha-coder/level_1_problem_19_sample_0_kernel.py"]
    assert (relu.model, relu.task.id, relu.sample) == ("alpha-coder", "19_ReLU", 0)
    assert relu.claimed_speedup == pytest.approx(0.1)  # ref_runtime 0.001 over runtime 0.01
    assert found["alpha-coder/level_1_problem_23_sample_0_kernel.py"].claimed_speedup == pytest.approx(3.0)
    assert found["beta-coder/level_1_problem_19_sample_0_kernel.py"].model == "beta-coder"


def test_the_leaderboard_layout_names_each_model_by_its_display_name_and_claims_torch_speedup():
    published = read(BOARD, "auto", PROBLEMS / "absent")  # its problems are its own
    assert published.layout == "leaderboard" and published.set_name == "level1"
    relus = [s for s in published.solutions if s.task.id == "19_ReLU"]
    assert sorted((s.model, s.claimed_speedup) for s in relus) == [("delta-coder", 2.0), ("gamma-coder", 0.1)]
    softmax = next(s for s in published.solutions if s.task.id == "23_Softmax")
    assert softmax.task.reference_path == (BOARD / "problems" / "l1_p23.py").resolve()
    # The same problem in both layouts is one task: the two sets share a table.
    runs_relu = next(s for s in read(RUNS, "auto", PROBLEMS).solutions if s.task.id == "19_ReLU")
    assert relus[0].task.content_hash == runs_relu.task.content_hash


def test_a_label_given_names_every_solution_and_folder_names_the_leaderboard_set():
    assert {s.model for s in read(RUNS, "runs", PROBLEMS, "name:kb-run-7").solutions} == {"kb-run-7"}
    assert {s.model for s in read(BOARD, "leaderboard", PROBLEMS, "folder").solutions} == {BOARD.name}


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["--layout", "zip"], "--layout zip: not a layout regrade reads"),
        (["--label", "author"], "--label author: not a label type; use one of folder, display_name, name:LABEL"),
        (["--label", "display_name"], "--label display_name: the runs layout has no display names"),
    ],
)
def test_bad_options_are_one_sentence_and_exit_2(tmp_path, args, culprit):
    done = forgebench(tmp_path, "regrade", str(RUNS), "--problems", str(PROBLEMS), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert culprit in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_data_json_entry_whose_file_is_missing_is_one_sentence_and_exit_2(tmp_path):
    board = tmp_path / "board"
    shutil.copytree(BOARD, board)
    data = json.loads((board / "data.json").read_text())
    data["Level 1: 19_ReLU"].append({"display_name": "eps-coder", "torch_speedup": 1.5, "file": "relu_eps"})
    (board / "data.json").write_text(json.dumps(data))
    done = forgebench(tmp_path, "regrade", str(board))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "'Level 1: 19_ReLU' entry by eps-coder names" in done.stderr and "relu_eps.py" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_folder_in_no_layout_and_a_problem_name_out_of_shape_are_sentences(tmp_path):
    with pytest.raises(ForgeBenchError, match="is in no layout regrade reads"):
        read(tmp_path, "auto", PROBLEMS)
    (tmp_path / "data.json").write_text(json.dumps({"Softmax": []}))
    with pytest.raises(ForgeBenchError, match="is not a problem name like 'Level 1: 23_Softmax'"):
        read(tmp_path, "auto", PROBLEMS)
