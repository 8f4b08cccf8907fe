"""A baseline added as one file (harness/evaluate/baselines/) shows on the leaderboard and the site with
no other edit: its columns come from the records (`speedup_vs_<name>`, `<name>_ms`), not from a list."""

import json
from pathlib import Path

import pytest

from forgebench.cli import main
from harness.record import mlflow_client
from leaderboard.site import pages
from leaderboard.site.build import build_site
from leaderboard.site.data import load_site

# A baseline no code of the leaderboard names, timed on two tasks: the kernel beats it on one.
PLANTED = "tensorrt_llm"
TASKS = {
    "t1": {"speedup_vs_eager": 3.0, "eager_ms": 3.0, f"{PLANTED}_ms": 1.25, f"speedup_vs_{PLANTED}": 1.25},
    "t2": {"speedup_vs_eager": 2.0, "eager_ms": 2.0, f"{PLANTED}_ms": 0.8, f"speedup_vs_{PLANTED}": 0.8},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, str]:
    """A suite run whose task runs recorded the planted baseline, as the suite records any baseline it
    timed: the tracking URI and the suite run's id."""
    folder = tmp_path_factory.mktemp("planted")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = mlflow_client(uri)
    experiment = client.create_experiment("forgebench", artifact_location=(folder / "artifacts").as_uri())
    tags = {"agent": "oneshot", "model": "offline", "platform": "cuda", "suite": "s", "task_set": "s@planted"}
    parent = client.create_run(experiment, tags={**tags, "forgebench.kind": "suite", "task_count": "2"}).info.run_id
    for task, metrics in TASKS.items():
        run = client.create_run(
            experiment, tags={**tags, "forgebench.kind": "task", "mlflow.parentRunId": parent, "task": task}
        ).info.run_id
        for key, value in {"correct": 1.0, "time_ms": 1.0, "cost_usd": 0.0, **metrics}.items():
            client.log_metric(run, key, value)
        client.set_terminated(run)
    client.set_terminated(parent)
    return uri, parent


def _leaderboard(capsys, uri: str, *args: str) -> str:
    assert main(["leaderboard", "--tracking-uri", uri, *args]) == 0
    return capsys.readouterr().out


def test_the_leaderboard_shows_a_column_for_a_baseline_it_never_named(capsys, store):
    uri, _ = store
    (table,) = json.loads(_leaderboard(capsys, uri, "--format", "json"))
    assert table["rows"][0][f"geomean_vs_{PLANTED}"] == pytest.approx((1.25 * 0.8) ** 0.5)
    assert f"geomean_vs_{PLANTED}" in _leaderboard(capsys, uri)
    per_task = _leaderboard(capsys, uri, "--per-task")
    assert f"speedup_vs_{PLANTED}" in per_task and f"{PLANTED}_ms" in per_task and "1.25" in per_task


def test_the_html_export_and_the_site_show_it_too(capsys, store, tmp_path):
    uri, parent = store
    assert f"<th>geomean_vs_{PLANTED}</th>" in _leaderboard(capsys, uri, "--format", "html")
    build_site(load_site(uri, "forgebench"), tmp_path)
    assert f"<th>geomean_vs_{PLANTED}</th>" in (tmp_path / "index.html").read_text()
    run_page = (tmp_path / pages.run_page(parent)).read_text()
    assert f"<th>speedup_vs_{PLANTED}</th>" in run_page and f"<th>{PLANTED}_ms</th>" in run_page


def test_the_html_export_is_a_page_of_the_site_that_stands_alone(capsys, store):
    page = _leaderboard(capsys, store[0], "--format", "html")
    style = (Path(pages.__file__).parent / "static" / "site.css").read_text().splitlines()[1]
    assert page.startswith("<!doctype html>") and style in page
    assert "static/" not in page and "<nav>" not in page  # no link to a site that is not there
