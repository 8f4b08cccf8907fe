"""Published sets regraded on the CPU and read back as runs: one store holds an agent's suite run and
the two fixture sets (KernelBench's runs layout and its leaderboard's, each with a kernel of its own, a
solution that only calls PyTorch and a wrong one); `forgebench leaderboard`, `compare --by model` and
the site show a row per model with its claims confirmed and refuted; the same command resumes; the
agent's run exports in KernelBench's runs layout."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.record import mlflow_client
from harness.regrade.layouts import read
from tests.leaderboard.test_site import Visit, browser  # noqa: F401 (a fixture, used by name)
from tests.test_suite import run, suite

pytestmark = pytest.mark.slow  # an agent run and six solutions built and timed on the CPU: about 100 s

SETS = Path(__file__).parent / "sets"
RUNS, BOARD, PROBLEMS = SETS / "kernelbench_runs", SETS / "kernelbench_leaderboard", SETS / "problems"
FAST = ("--override", "evaluate.budget_ms=50")
# (agent, model) -> (claims confirmed, claims refuted): a kernel of its own beats its modest claim;
# a wrong solution, and one that only calls PyTorch (rejected), refute theirs.
CLAIMS = {
    ("kernelbench_runs", "alpha-coder"): (1, 1),
    ("kernelbench_runs", "beta-coder"): (0, 1),
    ("kernelbench_leaderboard", "gamma-coder"): (1, 1),
    ("kernelbench_leaderboard", "delta-coder"): (0, 1),
}


def forgebench(cwd: Path, *args: str):
    return run([sys.executable, "-m", "forgebench.cli", *args], cwd)


def _regrade_runs(folder: Path):
    return forgebench(folder, "regrade", str(RUNS), "--problems", str(PROBLEMS), *FAST)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("regraded")
    done = suite(folder, "--agent=oneshot", "--rounds=1", f"--tasks={PROBLEMS / 'level1'}", "--platform=cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    for regrade in (_regrade_runs(folder), forgebench(folder, "regrade", str(BOARD), *FAST)):
        assert regrade.returncode == 0, regrade.stdout + regrade.stderr
        assert "Traceback" not in regrade.stderr and "nan" not in regrade.stdout.lower()
    return folder


def _board(folder: Path) -> list[dict]:
    done = forgebench(folder, "leaderboard", "--format", "json")
    assert done.returncode == 0, done.stderr
    (table,) = json.loads(done.stdout)  # one task set: the agent's run and the regraded sets together
    return table["rows"]


def test_the_leaderboard_has_a_row_per_model_with_its_claims_beside_the_agent_run(store):
    rows = _board(store)
    claims = {(r["agent"], r["model"]): (r["claims_confirmed"], r["claims_refuted"]) for r in rows}
    assert claims == {**CLAIMS, ("oneshot", "offline"): (None, None)}
    by_model = {r["model"]: r for r in rows}
    assert by_model["alpha-coder"]["solved"] == "1/2" and by_model["beta-coder"]["solved"] == "0/2"
    assert by_model["gamma-coder"]["cost_usd"] is None  # a published set states no cost
    shown = forgebench(store, "leaderboard").stdout
    assert "claims_confirmed" in shown and "claims_refuted" in shown and shown.count("| kernelbench_") == 4


def test_compare_by_model_pairs_the_regraded_models_with_the_agent(store):
    done = forgebench(store, "compare", "--by", "model", "--format", "json")
    assert done.returncode == 0, done.stderr
    comparisons = json.loads(done.stdout)["comparisons"]
    models = {c["a"]["model"] for c in comparisons} | {c["b"]["model"] for c in comparisons}
    assert models == {"offline", "alpha-coder", "beta-coder", "gamma-coder", "delta-coder"}
    relu = [t for c in comparisons if c["b"]["model"] == "delta-coder" for t in c["tasks"]]
    assert [t["task"] for t in relu] == ["19_ReLU"]  # delta published no softmax


def test_each_solution_is_a_task_run_with_its_verdict_claim_and_whole_reason(store):
    client = mlflow_client(f"sqlite:///{store / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("forgebench").experiment_id
    runs = client.search_runs([experiment], "tags.`forgebench.kind` = 'task' and tags.agent = 'kernelbench_runs'")
    by_solution = {r.data.tags["solution"]: r for r in runs}
    assert len(by_solution) == len(runs) == 3
    wrong = by_solution["alpha-coder/level_1_problem_23_sample_0_kernel.py"]
    assert wrong.data.tags["verdict"] == "incorrect" and wrong.data.metrics["claimed_speedup"] == pytest.approx(3.0)
    assert wrong.data.metrics["claim_confirmed"] == 0 and wrong.data.tags["model.label"] == "alpha-coder"
    result = json.loads(Path(client.download_artifacts(wrong.info.run_id, "result.json")).read_text())
    assert result["verdict"] == "incorrect" and "..." not in result["reason"]
    own = by_solution["alpha-coder/level_1_problem_19_sample_0_kernel.py"].data
    assert own.metrics["claim_confirmed"] == 1 and own.metrics["sol_fraction"] > 0
    parents = client.search_runs([experiment], "tags.`forgebench.kind` = 'regrade'")
    assert {p.data.tags["regrade.source"] for p in parents} == {"kernelbench_runs", "kernelbench_leaderboard"}
    assert all(p.info.status == "FINISHED" and p.data.tags["task_set"].startswith("level1@") for p in parents)


def test_the_site_shows_the_regraded_models_with_their_claims(store, browser):  # noqa: F811
    done = forgebench(store, "site", "site")
    assert done.returncode == 0, done.stderr
    visit = Visit(browser)
    visit.open(store / "site" / "index.html", 0)
    text = visit.page.inner_text("main")
    assert "claims_confirmed" in text and "claims_refuted" in text
    assert all(model in text for _, model in CLAIMS) and "offline" in text
    visit.close()
    for page in ("cost.html", "tasks/19_ReLU.html"):
        assert "gamma-coder" in (store / "site" / page).read_text()
    run_pages = [p.read_text() for p in (store / "site" / "runs").glob("*.html")]
    assert any("<title>alpha-coder · kernelbench_runs" in p and "claimed_speedup" in p for p in run_pages)


def test_export_writes_the_agent_run_in_kernelbench_runs_layout(store):
    (table,) = json.loads(forgebench(store, "leaderboard", "--format", "json", "--agent", "oneshot").stdout)
    out = store / "exported"
    done = forgebench(store, "export", "--layout", "kernelbench", "--run", table["rows"][0]["run"], str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    kernels = sorted(p.name for p in out.glob("level_*_kernel.py"))
    assert kernels and set(kernels) <= {
        "level_1_problem_19_sample_0_kernel.py",
        "level_1_problem_23_sample_0_kernel.py",
    }
    results = json.loads((out / "eval_results.json").read_text())
    assert all(entry["correctness"] and entry["runtime"] > 0 for entries in results.values() for entry in entries)
    published = read(out, "auto", out / "problems", "name:offline")  # a regrade can be made of it
    assert len(published.solutions) == len(kernels) and all(s.claimed_speedup for s in published.solutions)


def test_the_same_command_resumes_where_it_stopped_without_grading_again(store):
    (journal,) = store.glob("runs/regrade/kernelbench_runs-*/graded.jsonl")
    kept = journal.read_text().splitlines()
    journal.write_text("\n".join(kept[:-1]) + "\n")  # stopped before its last solution was journaled
    done = _regrade_runs(store)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 graded before, 1 to grade" in done.stdout
    assert sum(line.startswith("timing ") for line in done.stdout.splitlines()) == 1
    again = _regrade_runs(store)
    assert "3 graded before, 0 to grade" in again.stdout and "timing " not in again.stdout
    rows = _board(store)
    assert sum(r["agent"] == "kernelbench_runs" for r in rows) == 2  # still one run per model, one task run each
    assert {
        (r["agent"], r["model"]): (r["claims_confirmed"], r["claims_refuted"]) for r in rows if r["claims_refuted"]
    } == CLAIMS
