"""`forgebench export`: an e2e run's kept kernels as a bundle, or a run's best kernels in KernelBench's layout."""

from __future__ import annotations

import argparse
from pathlib import Path

from forgebench.cli import store
from harness.errors import ForgeBenchError


def add(sub) -> None:
    exp = sub.add_parser("export", help="an e2e run's kept kernels as a bundle, or a run's in KernelBench's layout")
    exp.add_argument("--run", required=True, help="the suite run (MLflow id or run_dir) that e2e ran on")
    exp.add_argument("--model", default=None, help="the model e2e ran (the bundle layout)")
    exp.add_argument(
        "--layout",
        choices=["bundle", "kernelbench"],
        default="bundle",
        help="bundle (default): an e2e run's kept kernels; kernelbench: the run's best kernels as KernelBench runs",
    )
    exp.add_argument("out", metavar="OUT", help="the folder to write (the bundle, or the runs layout)")
    store.add_options(exp)
    exp.set_defaults(handler=export)


def export(args: argparse.Namespace) -> int:
    if args.layout == "kernelbench":
        from harness.regrade.export import main as export_kernelbench

        return export_kernelbench(args)
    if args.model is None:
        raise ForgeBenchError("export: the bundle needs --model, the model e2e ran (or pass --layout kernelbench).")
    from harness.integrate.bundle import export
    from harness.integrate.e2e import latest_e2e

    tracking_uri, experiment = store.named(args)
    out = export(latest_e2e(args.run, args.model, tracking_uri, experiment), Path(args.out))
    print(f"wrote the bundle {out} (manifest.json, kernels/, references/, SHA256SUMS)")
    return 0
