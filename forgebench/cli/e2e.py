"""`forgebench e2e`: a suite run's best kernels back in their model, guarded; the model's speedup."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from forgebench.cli import store
from harness.errors import ForgeBenchError


def add(sub) -> None:
    e2e = sub.add_parser("e2e", help="a suite run's best kernels back in their model, guarded; the model's speedup")
    e2e.add_argument("--model", required=True, help="built-in (conf/capture/: resnet50, ...) or module:factory")
    e2e.add_argument("--run", required=True, help="the suite run: its MLflow id or its run_dir")
    e2e.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda when present")
    e2e.add_argument(
        "--kernel", action="append", default=[], metavar="TASK=FILE", help="use this kernel for the task instead"
    )
    e2e.add_argument("--budget-ms", type=float, default=1000.0, help="timing budget per model variant (ms)")
    e2e.add_argument("--out", default=None, help="folder for the kernels and decisions (default: runs/e2e/<time>)")
    e2e.add_argument("--timeout-s", type=float, default=1800.0, help="stop the model run after this long (s)")
    e2e.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="e.g. capture.workload.steps=1"
    )
    e2e.add_argument(
        "--no-compile", dest="compile", action="store_false", help="time no torch.compile variant (an LLM's takes long)"
    )
    e2e.add_argument(
        "--modes",
        default=None,
        metavar="M,M",
        help="execution modes to weigh the kernels in: eager, cuda_graph, compile, compile_cuda_graph "
        "(default: those the device runs; docs/e2e-modes.md)",
    )
    e2e.add_argument(
        "--whole-graph",
        dest="reuse_blocks",
        action="store_false",
        help="trace the whole model at once, not each distinct repeated block once",
    )
    store.add_options(e2e)
    e2e.set_defaults(handler=e2e_run)


def e2e_run(args: argparse.Namespace) -> int:
    from harness.integrate.e2e import run_e2e
    from harness.integrate.e2e_report import describe

    tracking_uri, experiment = store.named(args)
    extra = {}
    for item in args.kernel:
        task_id, sep, path = item.partition("=")
        if not sep or not task_id or not path:
            raise ForgeBenchError(f"--kernel {item!r}: write it as TASK_ID=FILE.py")
        extra[task_id] = Path(path)
    if args.budget_ms <= 0:
        raise ForgeBenchError(f"--budget-ms {args.budget_ms}: give a number of milliseconds above 0.")
    if args.timeout_s <= 0:
        raise ForgeBenchError(f"--timeout-s {args.timeout_s}: give a number of seconds above 0.")
    if ":" in args.model and args.override:
        raise ForgeBenchError("--override sets conf/capture/ entries; a module:factory model takes none.")
    device = args.device or ("cuda" if _has_cuda() else "cpu")
    from harness.integrate.modes import parse

    modes = [m.value for m in parse(args.modes)] if args.modes is not None else None
    out = Path(args.out) if args.out else Path("runs") / "e2e" / time.strftime("%Y%m%d-%H%M%S")
    found = run_e2e(
        args.model,
        args.run,
        tracking_uri,
        experiment,
        device,
        out,
        extra,
        args.budget_ms,
        timeout_s=args.timeout_s,
        overrides=args.override,
        compile=args.compile,
        modes=modes,
        reuse_blocks=args.reuse_blocks,
    )
    print(describe(found))
    return 0


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()
