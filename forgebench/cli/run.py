"""`forgebench run [-m] KEY=VALUE ...`: the suite through Hydra (sweeps with -m); listed here for --help only."""

from __future__ import annotations


def add(sub) -> None:
    # main() hands `run ...` to Hydra before the parser sees it.
    sub.add_parser(
        "run",
        help="the suite through Hydra: forgebench run [-m] KEY=VALUE ... [hydra/launcher=joblib] (sweeps)",
        add_help=False,
    )


def sweep(argv: list[str]) -> int:
    from harness.sweep import main

    return main(argv)
