"""A suite run's kernels in the models their tasks were captured from (leaderboard/predicted.py): a
column per captured model on the leaderboard, and `forgebench leaderboard --predicted` per mode,
over a store whose figures tests/leaderboard/captured_store.py works out by hand."""

import json
import math

import pandas as pd
import pytest

from forgebench.cli import main
from harness import amdahl
from leaderboard import predicted
from tests.leaderboard.captured_store import (
    CAPTURED,
    KB,
    PREDICTED_COMPILE,
    PREDICTED_EAGER,
    captured_store,
)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict[str, str]:
    return captured_store(tmp_path_factory.mktemp("predicted"))


def _cli(capsys, *args: str) -> str:
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _tables(capsys, store, *args: str) -> dict[str, pd.DataFrame]:
    out = _cli(capsys, "leaderboard", "--tracking-uri", store["uri"], "--format", "json", *args)
    return {table["task_set"]: pd.DataFrame(table["rows"]) for table in json.loads(out)}


def test_each_run_shows_what_its_kernels_predict_for_the_captured_model(capsys, store):
    rows = _tables(capsys, store)[CAPTURED].set_index("model")
    # A fused kernel counts only beyond the fastest single-call kernel of its ops: counting both
    # whole would give 1.43 for "all".
    assert rows.loc["all", "predicted_e2e_resnet50"] == pytest.approx(PREDICTED_EAGER["all"])
    assert rows.loc["fused", "predicted_e2e_resnet50"] == pytest.approx(PREDICTED_EAGER["fused"])
    board = _cli(capsys, "leaderboard", "--tracking-uri", store["uri"])
    tables = {part.split(" ", 1)[0]: part for part in board.split("### task set ")[1:]}
    assert "predicted_e2e_resnet50" in tables[CAPTURED]
    assert "predicted_e2e_resnet50" not in tables[KB]  # its tasks recorded no share: no column


def test_each_mode_scales_the_shares_by_what_the_mode_alone_gives_on_that_device(capsys, store):
    rows = _tables(capsys, store, "--predicted")[f"{CAPTURED}"]
    by = {(r["model"], r["mode"]): r for _, r in rows.iterrows()}
    # eager and compile, from the e2e run on the captured workload on the H200; none for the refused
    # cuda_graph, and the newer runs on another workload or device lend no figure.
    assert sorted(by) == [("all", "compile"), ("all", "eager"), ("fused", "compile"), ("fused", "eager")]
    for label in ("all", "fused"):
        assert by[(label, "eager")]["predicted_speedup"] == pytest.approx(PREDICTED_EAGER[label])
        assert by[(label, "compile")]["predicted_speedup"] == pytest.approx(PREDICTED_COMPILE[label])
        assert by[(label, "compile")]["mode_vs_eager"] == 2.0
        assert by[(label, "compile")]["alone_from"] == store["e2e"][:8]
    assert by[("all", "eager")]["kernels"] == "2/4" and by[("fused", "eager")]["kernels"] == "1/4"
    # Beside the prediction, what the e2e run of that suite run's kernels measured in the mode.
    assert by[("all", "compile")]["measured_speedup"] == 1.25 and by[("all", "compile")]["e2e_run"] == store["e2e"][:8]
    assert pd.isna(by[("fused", "compile")]["measured_speedup"])  # no e2e run of its kernels


def test_a_fused_kernel_slower_than_its_ops_single_kernels_adds_nothing():
    def run(fused_speedup: float) -> pd.DataFrame:
        tags = ["aten.mul", "aten.add", "rms"]
        members = [None, None, "aten.mul.Tensor,aten.add.Tensor"]
        return pd.DataFrame(
            {
                "source": "m",
                "operator": tags,
                "members": members,
                "time_share": [0.2, 0.1, 0.25],
                "correct": [1.0, 1.0, 1.0],
                "speedup_vs_eager": [3.0, 1.5, fused_speedup],
            }
        )

    ((_, found),) = predicted.by_source(run(2.0)).items()
    assert predicted.kernels(found) == [(0.2, 3.0), (0.1, 1.5)]  # 2x does not beat mul's 3x
    ((_, found),) = predicted.by_source(run(6.0)).items()
    assert predicted.kernels(found)[-1] == pytest.approx((0.25 / 3, 2.0))
    assert predicted.columns(run(6.0)) == {
        "predicted_e2e_m": pytest.approx(amdahl.predicted_speedup([(0.2, 3.0), (0.1, 1.5), (0.25 / 3, 2.0)]))
    }


def test_runs_recorded_without_shares_predict_nothing(capsys, store):
    rows = _tables(capsys, store, "--predicted", "--suite", KB)
    assert rows == {}
    assert predicted.columns(pd.DataFrame({"correct": [1.0], "speedup_vs_eager": [2.0]})) == {}


def test_a_mode_so_fast_alone_that_the_scaled_shares_pass_the_whole_predicts_nothing():
    tasks = pd.DataFrame(
        {
            "source": "m",
            "operator": ["aten.mul", "aten.add"],
            "time_share": [0.4, 0.3],
            "correct": [1.0, 1.0],
            "speedup_vs_eager": [10.0, 10.0],
        }
    )
    ((_, found),) = predicted.by_source(tasks).items()
    assert amdahl.predicted_speedup(predicted.kernels(found)) == pytest.approx(1 / (1 - 0.7 * 0.9))
    # Under a mode three times faster alone the shares would be 1.2 and 0.9 of its time: no answer.
    assert math.isnan(amdahl.predicted_speedup(predicted.kernels(found, scale=3.0)))
    assert amdahl.realization(1.3, math.nan) is None
