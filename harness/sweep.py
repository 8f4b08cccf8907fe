"""`forgebench run`: Hydra's own entry point, so a sweep (-m) runs through any Hydra launcher (joblib
on one machine, submitit on SLURM, Ray) and every job records into the same MLflow store.

A job is one `pytest suite/` invocation with the job's overrides: the suite composes, checks and
records exactly as it does when a person runs it, in a process of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from omegaconf import DictConfig

from harness.config import CONF_DIR

SUITE = Path(__file__).resolve().parents[1] / "suite"


def job_command(overrides: list[str]) -> list[str]:
    """The pytest command line of one job: its Hydra overrides handed to the suite as they are."""
    suite = [sys.executable, "-m", "pytest", str(SUITE), "-p", "no:cacheprovider"]
    return [*suite, *(f"--override={o}" for o in overrides)]


def _job(cfg: DictConfig) -> int:
    from hydra.core.hydra_config import HydraConfig

    hydra = HydraConfig.get()
    # The job's log, where Hydra keeps its config (runs/sweeps/<time>/<n>/ under -m).
    log = Path(hydra.runtime.output_dir) / f"{hydra.job.name}.log"
    # The folder the user ran `forgebench run` in: relative run_root, cache and store resolve there.
    status = run_logged(job_command(list(hydra.overrides.task)), hydra.runtime.cwd, log)
    if status not in (0, 1):  # 1: some task had no correct kernel, the job itself ran
        raise SystemExit(
            f"forgebench run: the job {list(hydra.overrides.task)} stopped with status {status}; see {log}"
        )
    return status


def run_logged(command: list[str], cwd: str, log: Path) -> int:
    """Run the job's pytest with its output shown as it comes and kept, line for line, in the job's
    log (the file Hydra's own logging of the job appends to as well): its exit status."""
    with (
        log.open("a", encoding="utf-8") as kept,
        subprocess.Popen(
            command,
            cwd=cwd,
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            encoding="utf-8",
            errors="replace",
        ) as job,
    ):
        for line in job.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.write(line)
            kept.flush()
    return job.returncode


def _open_store(argv: list[str]) -> None:
    """Make (or migrate) the MLflow store once, before the jobs start: jobs opening a new embedded
    store at the same moment race over its schema migration."""
    from harness.record import Recorder, store

    given = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith(("hydra", "-")))
    Recorder(*store(given.get("tracking_uri"), given.get("experiment")))


def check_overrides(argv: list[str]) -> None:
    """Compose every job's configuration once here, so a misspelt entry or a bad value is one sentence
    at the start (ForgeBenchError) rather than Hydra's message from inside each job. Under -m each
    value of a swept key (KEY=A,B) is tried in turn beside the others' first values."""
    from harness.config import compose

    given = [a for a in argv if "=" in a and not a.startswith(("-", "hydra"))]
    swept = {i: a.split("=", 1) for i, a in enumerate(given) if "," in a and "[" not in a and "{" not in a}
    first = [f"{swept[i][0]}={swept[i][1].split(',')[0]}" if i in swept else a for i, a in enumerate(given)]
    compose(overrides=first)
    for i, (key, values) in swept.items():
        for value in values.split(",")[1:]:
            compose(overrides=[*first[:i], f"{key}={value}", *first[i + 1 :]])


def main(argv: list[str]) -> int:
    """Hand argv to Hydra, which composes conf/ (with the schema), sweeps with -m, and launches."""
    import hydra

    from harness.schema import register

    check_overrides(argv)
    register()
    if {"-m", "--multirun"} & set(argv):
        _open_store(argv)
    app = hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")(_job)
    sys.argv = ["forgebench run", *argv]
    app()
    return 0
