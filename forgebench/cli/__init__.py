"""The one CLI: `forgebench run | eval | tasks | capture | regrade | e2e | export | leaderboard | compare | site`.

It stands above both the harness (which runs and writes records) and the leaderboard (which reads them).
Each command is a module here: its `add` puts the sub-command on the parser, and its handler imports
what it needs when it runs, so `forgebench --help` and a mistyped option answer at once.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import sys

from forgebench.cli import capture, compare, e2e, evaluate, export, leaderboard, regrade, run, site, tasks
from harness.errors import ForgeBenchError

# In the order --help lists them.
COMMANDS = (evaluate, tasks, capture, regrade, e2e, export, run, leaderboard, compare, site)


def parser() -> argparse.ArgumentParser:
    """The command line, built without importing torch, MLflow or any command's working modules."""
    top = argparse.ArgumentParser(prog="forgebench", description="Benchmark LLM-written kernels against PyTorch.")
    sub = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    skip_the_last_collections()
    try:
        if argv[:1] == ["run"]:  # Hydra parses its own command line (overrides, -m, hydra/launcher=...)
            return run.sweep(argv[1:])
        args = parser().parse_args(argv)
        return args.handler(args)
    except ForgeBenchError as exc:
        print(f"forgebench: {exc}", file=sys.stderr)
        return 2


def skip_the_last_collections() -> None:
    """At exit, the interpreter's last garbage collections walk every object torch, MLflow and pandas
    made (1.4 s a process on two cores) only to free memory the exit frees anyway: frozen, they are
    skipped. Registered once, however often it is called in one process (main(), the suite's pytest)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
