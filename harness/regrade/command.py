"""`forgebench regrade DIR`: a published set of solutions graded on this machine and recorded as runs.

The set is read in its layout (layouts.py); its solutions are built and timed (grade.py); each is
recorded as a task run under its model's regrade run (record.py) and journaled in the regrade's own
folder, `runs/regrade/<source>-<hash>` (report.py). The same command over the same folder finds that
folder and those runs again and grades only what it had not, as a suite run resumes.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from harness.regrade import layouts
from harness.regrade.grade import grade
from harness.regrade.layouts import PublishedSet, Solution
from harness.regrade.report import Journal, row, write


def _say(line: str) -> None:
    print(line, flush=True)  # as it happens, also into a pipe or a log


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "set"


def regrade_folder(run_root: Path, folder: Path, args, source: str) -> Path:
    """The regrade's own folder: one per published folder, layout, label, source and platform, so the
    same command finds it again."""
    identity = "|".join([str(folder.resolve()), args.layout, args.label or "", source, args.platform])
    return run_root / "regrade" / f"{_slug(source)}-{hashlib.sha256(identity.encode()).hexdigest()[:8]}"


def _sha(solution: Solution) -> str:
    return hashlib.sha256(solution.path.read_bytes()).hexdigest()[:16]


def main(args) -> int:
    """Read the set, grade what is not yet graded, record it, end each model's run, write the report."""
    from harness.config import compose

    folder = Path(args.solutions)
    published = layouts.read(folder, args.layout, Path(args.problems), args.label)
    source = args.source or folder.resolve().name
    overrides = ["evaluate.torch_ops=allow", *args.override]  # as KernelBench grades (an override wins)
    cfg = compose(platform=args.platform, overrides=overrides)
    run_dir = regrade_folder(Path(cfg.run_root), folder, args, source).resolve()
    journal = Journal(run_dir / "graded.jsonl")
    shas = {s.key: _sha(s) for s in published.solutions}
    pending = [s for s in published.solutions if not journal.done(s, shas[s.key])]
    models = sorted({s.model for s in published.solutions})
    _say(
        f"{len(published.solutions)} solutions by {len(models)} models ({', '.join(models)}) from {source}, "
        f"{published.layout} layout; {len(published.solutions) - len(pending)} graded before, {len(pending)} to grade"
    )
    for line in published.skipped:
        _say(f"skipped {line}")
    _grade_and_record(cfg, published, pending, source, run_dir, journal, shas, args)
    rows = [journal.rows[s.key] for s in published.solutions if s.key in journal.rows]
    out = Path(args.report) if args.report else run_dir / "report.md"
    written = write(rows, out)
    print(out.read_text(), end="")
    print(f"wrote {out} and {written}; records: MLflow {cfg.tracking_uri} (experiment '{cfg.experiment}')")
    return 0


def _grade_and_record(cfg, published: PublishedSet, pending, source, run_dir, journal, shas, args) -> None:
    from omegaconf import OmegaConf

    from harness import devices
    from harness.config import instantiate
    from harness.evaluate import Evaluator
    from harness.evaluate.settings import for_run
    from harness.record import environment
    from harness.regrade.record import RegradeRecorder
    from harness.tasks import task_set_id

    platform = instantiate(cfg.platform, "platform")
    evaluator = Evaluator(platform, for_run(cfg), run_dir / "work", Path(cfg.cache_dir))
    recorder = RegradeRecorder(cfg.tracking_uri, cfg.experiment)
    tasks = list({s.task.id: s.task for s in published.solutions}.values())
    tags = {
        "agent": source,
        "platform": platform.name,
        "suite": published.set_name,
        "task_set": task_set_id(published.set_name, tasks),
        # Every problem of the set counts for every model: one that published no solution to it failed it.
        "task_count": str(len(tasks)),
        "torch_ops": evaluator.settings.torch_ops or "forbid",
        "run_dir": str(run_dir),
        "regrade.source": source,
        "regrade.layout": published.layout,
        "regrade.folder": str(Path(args.solutions).resolve()),
        **environment(platform.device),
    }
    tags["device"] = tags["env.device"]
    config = OmegaConf.to_container(cfg)
    parents = {m: recorder.start_model(tags, m, config) for m in sorted({s.model for s in published.solutions})}

    def graded(solution: Solution, result, wall_s: float) -> None:
        where = run_dir / "solutions" / _slug(solution.key)
        recorder.record_solution(parents[solution.model], solution, result, wall_s, where)
        journal.add(row(solution, result, shas[solution.key]))

    # Builds overlap timings where a timing counts device time, not the host's that builds take.
    overlap = devices.load(platform.device).asynchronous
    try:
        grade(evaluator, pending, args.jobs or os.cpu_count() or 1, _say, graded, overlap=overlap)
    finally:
        evaluator.close()
    _end(recorder, parents)  # a stopped regrade's runs stay RUNNING: unfinished until resumed


def _end(recorder, parents: dict[str, str]) -> None:
    """Each model's run ended, as a suite run ends (the leaderboard ranks it from its task runs)."""
    for parent in parents.values():
        recorder.end_suite(parent, "FINISHED")
