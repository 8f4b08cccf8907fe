"""`forgebench leaderboard`: one table per task set, from MLflow alone (md, json, csv or html)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from forgebench.cli import store
from harness.errors import ForgeBenchError


def add(sub) -> None:
    board = sub.add_parser("leaderboard", help="the leaderboard, one table per task set, from MLflow alone")
    board.add_argument("--run", dest="run_id", default=None, help="only this suite run (its id, or its first 6+)")
    board.add_argument("--per-task", action="store_true", help="one row per task instead of per suite run")
    board.add_argument("--e2e", action="store_true", help="the models with their kernels back in (forgebench e2e)")
    board.add_argument(
        "--predicted",
        action="store_true",
        help="each run's kernels in the models they came from: Amdahl over the capture's shares, per mode",
    )
    board.add_argument("--format", choices=["md", "json", "csv", "html"], default="md", help="default: md")
    board.add_argument("--out", default=None, metavar="FILE", help="write the table to FILE instead of stdout")
    board.add_argument("--suite", default=None, help="only runs of this suite (or task set, as the headings name it)")
    board.add_argument("--model", default=None, help="only runs of this model label (or litellm model string)")
    board.add_argument("--agent", default=None, help="only runs of this agent")
    board.add_argument("--platform", default=None, help="only runs on this platform")
    board.add_argument("--since", default=None, help="only runs started then or later: 2026-11-30 or an ISO time (UTC)")
    store.add_options(board)
    board.set_defaults(handler=leaderboard)


def leaderboard(args: argparse.Namespace) -> int:
    from leaderboard.formats import FORMATS
    from leaderboard.table import (
        PREDICTED_LAYOUT,
        RUN_LAYOUT,
        TASK_LAYOUT,
        by_task_set,
        per_task,
        select_runs,
        summarize,
        task_runs,
    )

    tracking_uri, experiment = store.checked(args)
    if args.e2e:
        from leaderboard.e2e import LAYOUT, e2e_runs

        runs = e2e_runs(tracking_uri, experiment)
        if runs.empty:
            print(f"no e2e runs in {tracking_uri}; run `forgebench e2e` first.", file=sys.stderr)
        return _write(FORMATS[args.format](by_task_set(runs), LAYOUT), args.out)
    tasks = task_runs(tracking_uri, experiment)
    if tasks.empty:
        print(f"no ForgeBench runs in {tracking_uri}; run `pytest suite/` first.", file=sys.stderr)
    else:
        filters = {k: getattr(args, k) for k in ("suite", "model", "agent", "platform", "since")}
        tasks = select_runs(tasks, run=args.run_id, **filters)
    if args.predicted:
        from leaderboard.e2e import e2e_runs
        from leaderboard.predicted import view

        frame = view(tasks, e2e_runs(tracking_uri, experiment))
        if frame.empty and not tasks.empty:
            print("no captured tasks with a recorded time_share in these runs; nothing to predict.", file=sys.stderr)
        return _write(FORMATS[args.format](by_task_set(frame), PREDICTED_LAYOUT), args.out)
    frame, layout = (per_task(tasks), TASK_LAYOUT) if args.per_task else (summarize(tasks), RUN_LAYOUT)
    return _write(FORMATS[args.format](by_task_set(frame), layout), args.out)


def _write(text: str, out: str | None) -> int:
    if out is None:
        print(text)
        return 0
    out = Path(out)
    if not out.parent.is_dir():
        raise ForgeBenchError(f"--out {out}: the folder {out.parent} does not exist; create it or name another file.")
    out.write_text(text + "\n")
    print(f"wrote {out}")
    return 0
