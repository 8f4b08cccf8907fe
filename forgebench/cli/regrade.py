"""`forgebench regrade DIR`: a published set of solutions graded here and recorded as runs."""

from __future__ import annotations

import argparse
import os


def add(sub) -> None:
    regr = sub.add_parser("regrade", help="grade a published set of solutions here and record it as runs")
    regr.add_argument("solutions", metavar="DIR", help="a published set in KernelBench's layouts (docs/regrade.md)")
    regr.add_argument("--layout", default="auto", help="auto (default), runs, leaderboard or named")
    regr.add_argument("--label", default=None, help="who wrote each solution: folder, display_name or name:LABEL")
    regr.add_argument("--source", default=None, help="the system that published the set (default: DIR's name)")
    regr.add_argument(
        "--problems",
        default=os.path.join(os.environ.get("FORGEBENCH_SHARED", "../shared"), "data", "kernelbench"),
        help="KernelBench's problems (level folders); default: ../shared/data/kernelbench",
    )
    regr.add_argument("--platform", default="cpu", help="cpu, cuda or triton (conf/platform/)")
    regr.add_argument("--jobs", type=int, default=None, help="builds at once (default: the cores)")
    regr.add_argument("--report", default=None, metavar="FILE", help="the report's .md (a .json beside it)")
    regr.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a Hydra override")
    regr.set_defaults(handler=regrade)


def regrade(args: argparse.Namespace) -> int:
    from harness.regrade.command import main

    return main(args)
