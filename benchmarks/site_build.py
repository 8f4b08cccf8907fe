"""How long `forgebench site` takes over a store of 10 suite runs x 50 tasks with search trees: the
store is made with MlflowClient the way docs/records.md lays runs out (tags, final and step metrics,
best_kernel.py, tree.jsonl, transcripts/), then the command is timed as a user runs it.

From the repository root (CPU only; the store is made once per folder and reused):

    .venv/bin/python benchmarks/site_build.py [--folder /tmp/site-bench] [--suites 10] [--tasks 50]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.agents.tree import Node  # noqa: E402
from harness.evaluate.result import EvalResult  # noqa: E402
from harness.record import mlflow_client  # noqa: E402

ROUNDS = 8
# A kernel of realistic length: prompts and sources are most of what a tree page holds.
KERNEL = (ROOT / "tests" / "candidates" / "rmsnorm_cpp.py").read_text()


def _result(task: str, rng: random.Random) -> EvalResult:
    if rng.random() < 0.35:
        return EvalResult(task, "cpu", rng.choice(["incorrect", "compile_error", "runtime_error"]), reason="x" * 400)
    eager_ms = rng.uniform(0.05, 2.0)
    time_ms = eager_ms / rng.uniform(0.5, 3.0)
    return EvalResult(
        task,
        "cpu",
        "correct",
        time_ms=time_ms,
        baselines={"eager_ms": eager_ms},
        speedup_vs_eager=eager_ms / time_ms,
        speedups={"eager": eager_ms / time_ms},
        phases={"build": 0.5, "check": 0.1, "time": 0.3},
        env={"device": "cpu", "torch": "2.13.0"},
    )


def _tree(folder: Path, task: str, cost_per_call: float, rng: random.Random) -> list[Node]:
    """A search tree of ROUNDS nodes, each child of a random earlier one, with its transcripts."""
    transcripts = folder / "transcripts"
    transcripts.mkdir(parents=True)
    nodes = []
    for node_id in range(ROUNDS):
        parent = rng.choice(nodes) if nodes and rng.random() < 0.8 else None
        prompt_id = f"{task}{node_id:04d}".encode().hex()[:20]
        messages = [
            {"role": "system", "content": "You write fast kernels. " * 40},
            {"role": "user", "content": f"Task {task}.\n\n" + KERNEL * 2},
        ]
        text = "Here is a faster kernel.\n```python\n" + KERNEL + f"# variant {node_id}\n```\n"
        cost = cost_per_call * rng.uniform(0.8, 1.2)
        (transcripts / f"{prompt_id}.json").write_text(
            json.dumps({"model": "m", "node": node_id, "messages": messages})
        )
        (transcripts / f"response-{prompt_id}.json").write_text(
            json.dumps(
                {"text": text, "model": "m", "tokens_in": 3000, "tokens_out": 900, "cost_usd": cost, "latency_s": 2}
            )
        )
        nodes.append(
            Node(
                id=node_id,
                parent_id=parent.id if parent else None,
                action="refine" if parent else "new",
                prompt_id=prompt_id,
                response_id=f"response-{prompt_id}",
                source=KERNEL + f"# variant {node_id}\n",
                result=_result(task, rng),
                cost_usd=cost,
                tokens_in=3000,
                tokens_out=900,
                wall_s=rng.uniform(1, 5),
            )
        )
    (folder / "tree.jsonl").write_text("".join(json.dumps(n.to_dict()) + "\n" for n in nodes))
    return nodes


def _record_task(client, experiment_id: str, parent_id: str, tags: dict, task: str, folder: Path, rng) -> None:
    from mlflow.entities import Metric

    nodes = _tree(folder, task, float(tags["cost_per_call"]), rng)
    run = client.create_run(
        experiment_id,
        run_name=task,
        tags={
            **{k: v for k, v in tags.items() if k != "cost_per_call"},
            "mlflow.parentRunId": parent_id,
            "forgebench.kind": "task",
            "task": task,
            "source": "synthetic",
            "operator": "aten.mul",
            "stop_reason": "rounds",
            "task_hash": f"{abs(hash(task)):012x}"[:12],
        },
    )
    now = int(time.time() * 1000)
    metrics, best, cost, tokens, wall = [], 0.0, 0.0, 0, 0.0
    for step, node in enumerate(nodes, start=1):
        best, cost = max(best, node.speedup), cost + node.cost_usd
        tokens, wall = tokens + node.tokens_in + node.tokens_out, wall + node.wall_s
        for key, value in (
            ("best_speedup", best),
            ("cum_cost_usd", cost),
            ("cum_tokens", tokens),
            ("cum_wall_s", wall),
        ):
            metrics.append(Metric(key, value, now, step))
    winner = max((n for n in nodes if n.correct), key=lambda n: n.speedup, default=None)
    final = {"correct": float(winner is not None), "cost_usd": cost, "rounds": ROUNDS, "llm_calls": ROUNDS}
    final.update({"tokens_in": 3000.0 * ROUNDS, "tokens_out": 900.0 * ROUNDS, "wall_s": wall})
    if winner:
        final.update(speedup_vs_eager=winner.speedup, time_ms=winner.result.time_ms, **winner.result.baselines)
        client.log_text(run.info.run_id, winner.source, "best_kernel.py")
        client.log_dict(run.info.run_id, winner.result.to_dict(), "best_result.json")
    metrics += [Metric(k, float(v), now, 0) for k, v in final.items()]
    client.log_batch(run.info.run_id, metrics=metrics)
    client.log_artifact(run.info.run_id, str(folder / "tree.jsonl"))
    client.log_artifacts(run.info.run_id, str(folder / "transcripts"), "transcripts")
    client.set_terminated(run.info.run_id)


def make_store(folder: Path, suites: int, tasks: int) -> str:
    """A store of `suites` suite runs over one task set of `tasks` tasks; returns its tracking URI."""
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = mlflow_client(uri)
    experiment_id = client.create_experiment("forgebench", artifact_location=(folder / "mlartifacts").as_uri())
    rng = random.Random(0)
    names = [f"synthetic_op_{i:02d}" for i in range(tasks)]
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(suites):
            tags = {
                "agent": ["mcts", "refine", "analyst"][index % 3],
                "model": "openai/loopback-coder",
                "model.label": f"provider-{index}",
                "platform": "cpu",
                "suite": "synthetic",
                "task_set": "synthetic@0123456789ab",
                "device": "x86_64",
                "cost_per_call": str(0.001 * (index + 1)),
            }
            suite_tags = {k: v for k, v in tags.items() if k != "cost_per_call"}
            parent = client.create_run(experiment_id, tags={**suite_tags, "forgebench.kind": "suite"})
            for task in names:
                _record_task(
                    client, experiment_id, parent.info.run_id, tags, task, Path(scratch) / f"{index}-{task}", rng
                )
            client.set_terminated(parent.info.run_id)
            print(f"recorded suite run {index + 1} of {suites}", flush=True)
    return uri


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default="/tmp/forgebench-site-bench", help="where the store and the site go")
    parser.add_argument("--suites", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=50)
    args = parser.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    if not (folder / "mlflow.db").is_file():
        uri = make_store(folder, args.suites, args.tasks)
    out = folder / "site"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "forgebench.cli", "site", str(out), "--tracking-uri", uri],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        return done.returncode
    pages = sum(1 for _ in out.rglob("*.html"))
    print(f"forgebench site: {pages} pages from {args.suites} suite runs x {args.tasks} tasks in {seconds:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
