"""`forgebench compare`: suite runs task by task (wins, losses, ties, paired geomean ratio)."""

from __future__ import annotations

import argparse

from forgebench.cli import store
from harness.errors import ForgeBenchError


def add(sub) -> None:
    comp = sub.add_parser("compare", help="suite runs task by task: wins, losses, ties, paired geomean ratio")
    comp.add_argument("runs", nargs="*", metavar="RUN", help="suite run ids (or 6+ first characters); B..., against A")
    comp.add_argument(
        "--by", choices=["model", "agent"], default=None, help="the latest run of each model label or agent, per set"
    )
    comp.add_argument("--suite", default=None, help="only runs of this suite (or task set)")
    comp.add_argument("--any-set", action="store_true", help="allow runs of different task sets (shared tasks only)")
    comp.add_argument("--format", choices=["md", "json"], default="md", help="default: md")
    store.add_options(comp)
    comp.set_defaults(handler=compare)


def compare(args: argparse.Namespace) -> int:
    from leaderboard.compare import FORMATS, compare_runs, latest_per_group, pick_runs
    from leaderboard.table import select_runs, task_runs

    if args.by and args.runs:
        raise ForgeBenchError("compare takes suite runs or --by, not both; drop the runs or the --by option.")
    tracking_uri, experiment = store.checked(args)
    tasks = task_runs(tracking_uri, experiment)
    if tasks.empty:
        raise ForgeBenchError(f"no ForgeBench runs in {tracking_uri} to compare; run `pytest suite/` first.")
    tasks = select_runs(tasks, suite=args.suite)
    if args.by:
        groups = latest_per_group(tasks, args.by)
        selection = (
            f"The latest suite run of each {args.by} in each task set (not pooled), "
            "each compared with the set's leader (A)"
        )
    else:
        groups = [pick_runs(tasks, args.runs, args.any_set)]
        selection = "Each run named compared with the first (A)"
    comparisons = [compare_runs(tasks, runs[0], other) for runs in groups for other in runs[1:]]
    print(FORMATS[args.format](comparisons, selection))
    return 0
