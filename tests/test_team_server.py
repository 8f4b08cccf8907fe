"""A team's server: two suites at once against one MLflow server on PostgreSQL; every task run and
artifact arrives once, and the leaderboard and the site are built from the server alone."""

import json
import subprocess
from pathlib import Path

import pytest

from harness.record import mlflow_client
from tests.team_server import TeamServer, postgres_bin
from tests.test_suite import SMALL_PAIR, suite_command, user_env

TASKS = f"tasks={SMALL_PAIR}"


@pytest.mark.slow
@pytest.mark.skipif(postgres_bin() is None, reason="PostgreSQL is not installed (apt-get install postgresql)")
def test_two_suites_at_once_record_everything_once_on_a_postgresql_backed_server(tmp_path):
    tmp_path.chmod(0o711)
    with TeamServer(tmp_path / "server") as server:
        env = user_env(MLFLOW_TRACKING_URI=server.tracking_uri)
        runs = {}
        for label in ("team-a", "team-b"):
            folder = tmp_path / label
            folder.mkdir(mode=0o711)
            command = suite_command("--override", TASKS, "--rounds=1", "--override", f"model.label={label}")
            runs[label] = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, text=True)
        outputs = {label: run.communicate(timeout=900)[0] for label, run in runs.items()}
        for label, run in runs.items():
            # The verdict of a task without a correct kernel, then the tail: the tail alone is the tables.
            why = [line for line in outputs[label].splitlines() if "no correct kernel" in line]
            assert run.returncode == 0, "\n".join(why[:4]) + "\n" + outputs[label][-3000:]
            assert not (tmp_path / label / "mlflow.db").exists()  # the records went to the server

        client = mlflow_client(server.tracking_uri)
        experiment = client.get_experiment_by_name("forgebench")
        parents = client.search_runs([experiment.experiment_id], "tags.`forgebench.kind` = 'suite'")
        assert sorted(p.data.tags["model.label"] for p in parents) == ["team-a", "team-b"]
        assert all(p.info.status == "FINISHED" for p in parents)
        children = client.search_runs([experiment.experiment_id], "tags.`forgebench.kind` = 'task'")
        pairs = sorted((c.data.tags["model.label"], c.data.tags["task"]) for c in children)
        assert pairs == sorted((label, task) for label in runs for task in ("rmsnorm_small", "silu_and_mul_small"))
        for child in children:
            names = {a.path for a in client.list_artifacts(child.info.run_id)}
            assert {"best_kernel.py", "best_result.json", "tree.jsonl", "transcripts"} <= names, names
            tree = client.download_artifacts(child.info.run_id, "tree.jsonl", str(tmp_path))
            assert len(Path(tree).read_text().splitlines()) == 1

        board = subprocess.run(
            [*suite_command()[:1], "-m", "forgebench.cli", "leaderboard", "--format", "json"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert board.returncode == 0, board.stderr
        (table,) = json.loads(board.stdout)
        assert sorted(row["model"] for row in table["rows"]) == ["team-a", "team-b"]

        site = subprocess.run(
            [*suite_command()[:1], "-m", "forgebench.cli", "site", str(tmp_path / "site")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert site.returncode == 0, site.stderr
        index = (tmp_path / "site" / "index.html").read_text()
        assert "team-a" in index and "team-b" in index
