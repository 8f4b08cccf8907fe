"""A regrade's MLflow records, shaped like a suite run's so the leaderboard, compare and the site read
them unchanged: a parent run of kind `regrade` per model of the set (agent: the system that published
it), and under it a task run per solution with its verdict, figures, and the claimed speedup beside
the measured one. A parent is found again by its run folder and model, so the same command resumes."""

from __future__ import annotations

import time
from pathlib import Path

from harness.agents.tree import Node
from harness.evaluate.result import EvalResult
from harness.record import INHERITED_TAGS, Recorder, result_metrics, result_tags
from harness.regrade.layouts import Solution

# A claim is confirmed when the measured speedup over eager reaches this share of it (timing on
# another machine and day differs by some percent; a claim twice the measurement is not noise).
CLAIM_SHARE = 0.9


def claim_confirmed(result: EvalResult, claimed: float | None) -> bool | None:
    """Whether the measurement bears the claim out: a correct kernel at least CLAIM_SHARE of the
    claimed speedup over eager. None where nothing was claimed."""
    if claimed is None:
        return None
    return result.correct and (result.speedup_vs_eager or 0.0) >= CLAIM_SHARE * claimed


class RegradeRecorder(Recorder):
    def start_model(self, tags: dict[str, str], model: str, config: dict) -> str:
        """The parent run of one model's solutions: a new one, or the one this regrade folder started
        for the model before it was stopped."""
        return self.start_parent("regrade", {**tags, "model": model, "model.label": model}, config, ("model.label",))

    def record_solution(
        self, parent_run_id: str, solution: Solution, result: EvalResult, wall_s: float, folder: Path
    ) -> str:
        """The solution's task run (replacing one recorded before a kill), its one-node tree beside it
        in `folder` and among its artifacts, so the site's tree page shows its source and verdict."""
        from mlflow.entities import Metric

        source = solution.path.read_text(errors="replace")
        node = Node(0, None, "regrade", "", "", source, result, wall_s=wall_s, note=f"written by {solution.model}")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tree.jsonl").write_text(node_line(node))
        with self._writing():
            self._forget_solution(parent_run_id, solution.key)
            parent_tags = self.client.get_run(parent_run_id).data.tags
            tags = {
                "mlflow.parentRunId": parent_run_id,
                "forgebench.kind": "task",
                "task": solution.task.id,
                "task_hash": solution.task.content_hash,
                "source": solution.task.source,
                "operator": solution.task.operator or "unknown",
                "solution": solution.key,
                "verdict": result.verdict,
                **({"sample": str(solution.sample)} if solution.sample is not None else {}),
                **{k: parent_tags[k] for k in INHERITED_TAGS if k in parent_tags},
                **(result_tags(result) if result.correct else {}),
            }
            start = int((time.time() - wall_s) * 1000)
            run_id = self.client.create_run(self.experiment_id, start, tags, run_name=solution.task.id).info.run_id
            now = int(time.time() * 1000)
            numbers = solution_metrics(solution, result, wall_s)
            metrics = [Metric(k, float(v), now, 0) for k, v in numbers.items() if v is not None]
            self.client.log_batch(run_id, metrics=metrics)
            self.client.log_artifact(run_id, str(folder / "tree.jsonl"))
            self.client.log_dict(run_id, result.to_dict(), "result.json")  # the reason whole
            if result.correct:
                self.client.log_text(run_id, source, "best_kernel.py")
            self.client.set_terminated(run_id)
        return run_id

    def _forget_solution(self, parent_run_id: str, key: str) -> None:
        query = f"tags.`mlflow.parentRunId` = '{parent_run_id}' and tags.solution = '{key}'"
        for run in self.client.search_runs([self.experiment_id], query):
            self.client.delete_run(run.info.run_id)


def solution_metrics(solution: Solution, result: EvalResult, wall_s: float) -> dict[str, float | None]:
    """A solution's metrics: those of a suite's task run for its kernel (none but `correct` when it
    is not), the claim and whether the measurement confirmed it. No cost: the set states none."""
    confirmed = claim_confirmed(result, solution.claimed_speedup)
    return {
        "correct": float(result.correct),
        "wall_s": wall_s,
        "rounds": 1.0,
        "claimed_speedup": solution.claimed_speedup,
        "claim_confirmed": None if confirmed is None else float(confirmed),
        **(result_metrics(result) if result.correct else {}),
    }


def node_line(node: Node) -> str:
    import json

    return json.dumps(node.to_dict()) + "\n"
