"""A suite run: objects built from the composed config, each task searched, recorded as it ends."""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness import devices
from harness.agents.base import AgentContext, AgentOutcome
from harness.agents.tree import SearchTree
from harness.budget import Budget
from harness.config import instantiate, task_patterns
from harness.errors import ForgeBenchError
from harness.evaluate import Evaluator
from harness.evaluate.footprint import check_fits
from harness.evaluate.settings import for_run
from harness.progress import Progress
from harness.record import Recorder, api_host, config_hash, environment
from harness.tasks import BrokenTask, Task, select, set_name, task_set_id


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


@dataclass
class TaskOutcome:
    task: Task
    agent: AgentOutcome
    run_id: str


class SuiteRun:
    """Everything one `pytest suite/` invocation shares; tasks are run one at a time."""

    def __init__(self, cfg: DictConfig, run_dir: Path | None = None, parent_run_id: str | None = None):
        """Every check a run can fail at start comes before anything is written: the tasks select,
        the model's provider resolves and its key is set, the platform runs here, the workers can
        reach their folders and the MLflow store opens. Only then the run folder and the suite's
        MLflow run are made. An xdist worker is handed the controller's suite run and run folder
        (parent_run_id, run_dir): one suite run per invocation, however many workers."""
        self.cfg = cfg
        self.selected = select(task_patterns(cfg), keep_broken=True)
        self.agent = instantiate(cfg.agent, "agent")
        self.model = instantiate(cfg.model, "model")
        self.model.check_ready()  # fail at start, not after the first task, on a missing key
        self.platform = instantiate(cfg.platform, "platform")
        self.budget: Budget = OmegaConf.to_object(cfg.budget)
        label = _slug(f"{self.agent.name}-{self.model.name}-{self.platform.name}")
        fixed = run_dir or (Path(cfg.run_dir) if cfg.run_dir else None)
        # A new folder per run, unique even for runs started in the same second (a sweep's jobs):
        # a shared folder would mean one resumed run, not two.
        fresh = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.run_dir = fixed or Path(cfg.run_root) / label / fresh
        _check_writable(self.run_dir, "run_dir" if fixed else "run_root")
        self.evaluator = Evaluator(self.platform, for_run(cfg), self.run_dir / "work", Path(cfg.cache_dir))
        self.recorder = Recorder(cfg.tracking_uri, cfg.experiment)
        self.model.trace_to(cfg.tracking_uri, cfg.experiment)
        config = OmegaConf.to_container(cfg)
        spec = cfg.tasks
        suite = cfg.suite.name if spec is None else spec if isinstance(spec, str) else ",".join(map(str, spec))
        # Paths go by their names in the task set's (tasks.set_name); the suite tag keeps them as given.
        set_named = cfg.suite.name if spec is None else set_name(spec)
        tags = {
            "agent": self.agent.name,
            "model": self.model.name,
            "model.label": self.model.label or self.model.name,
            "platform": self.platform.name,
            "suite": suite,
            "task_set": task_set_id(set_named, [t for t in self.selected if isinstance(t, Task)]),
            "task_count": str(len(self.selected)),
            "agent_config_hash": config_hash(config["agent"]),
            "torch_ops": self.evaluator.settings.torch_ops or "forbid",  # evaluate.torch_ops, as judged
            "run_dir": str(self.run_dir.resolve()),
            **environment(self.platform.device),
        }
        if host := api_host(self.model.api_base):
            tags["model.api_host"] = host
        tags["device"] = tags["env.device"]
        self.owns_suite_run = parent_run_id is None
        self.parent_run_id = parent_run_id or self.recorder.start_suite(tags, config)

    def tasks(self) -> list[Task | BrokenTask]:
        """The selected tasks; a broken one stays in the list, to show as one error in the suite."""
        return self.selected

    def run_task(self, task: Task, progress: Progress | None = None) -> TaskOutcome:
        """The agent's search on the task, recorded; TaskTooLarge first where this machine cannot run it."""
        check_fits(task, devices.load(self.platform.device).asynchronous)
        folder = self.run_dir / "tasks" / task.id
        tree = SearchTree(folder / "tree.jsonl", on_add=progress.node_landed if progress else None)
        ctx = AgentContext(task, self.platform, self.model, self.evaluator, tree, self.budget, folder / "transcripts")
        # A task resumed after a kill has spent its earlier rounds' time already (each node's wall_s).
        spent_s = sum(node.wall_s for node in tree.nodes)
        started = time.monotonic() - spent_s
        if progress:
            progress.start_task(task.id, self.budget.rounds, tree)
        try:
            outcome = self.agent.run(ctx)
        finally:
            self.evaluator.release(task)
            if progress:
                progress.end_task()
        run_id = self.recorder.record_task(self.parent_run_id, task, outcome, folder, time.monotonic() - started)
        return TaskOutcome(task, outcome, run_id)

    def close(self, status: str = "FINISHED") -> None:
        """Stop the workers and end the suite run. Its aggregates are the leaderboard's to compute from
        the task runs when it reads them: the run writes records, it does not rank them."""
        self.evaluator.close()
        if not self.owns_suite_run:
            return  # an xdist worker's: the controller ends it once every worker is done
        self.recorder.end_suite(self.parent_run_id, status)


def _check_writable(folder: Path, setting: str) -> None:
    """The run folder can be made and written, checked at start (a folder under a file, or in /proc,
    would otherwise fail every task with a traceback): nothing is created here."""
    existing = next((p for p in [folder, *folder.parents] if p.exists()), None)
    problem = None
    if existing is None or not existing.is_dir():
        problem = f"{existing} is not a folder"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = f"{existing} cannot be written by this user"
    elif str(existing.resolve()).startswith(("/proc", "/sys")):
        problem = f"{existing} is a kernel filesystem"
    if problem:
        raise ForgeBenchError(
            f"{setting}: the run folder {folder} cannot be made ({problem}); choose another with "
            f"--override {setting}=PATH."
        )
