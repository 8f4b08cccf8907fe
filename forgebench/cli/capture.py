"""`forgebench capture`: profile a model at the ATen level and write its costly calls as tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import ForgeBenchError


def add(sub) -> None:
    cap = sub.add_parser("capture", help="profile a model at the ATen level and write its costly calls as tasks")
    cap.add_argument("--model", required=True, help="built-in (conf/capture/: resnet50, qwen35, ...) or module:factory")
    cap.add_argument(
        "--device",
        choices=["cpu", "cuda", "meta"],
        default=None,
        help="default: cuda when present, else cpu; meta records shapes of a model too large to run and "
        "estimates shares from bytes and FLOPs",
    )
    cap.add_argument("--out", default=None, help="tasks root; writes OUT/<model>/ (default: tasks/)")
    cap.add_argument(
        "--coverage", type=float, default=0.9, help="tasks are taken costliest first until they cover this share"
    )
    cap.add_argument(
        "--min-share", type=float, default=0.001, help="least share of the model's time for a task (fused or not)"
    )
    cap.add_argument(
        "--cut-gap",
        type=float,
        default=None,
        help="once --coverage is reached, go on to the first group more than this fraction below the one before "
        "(or down to --min-share), so groups of near-equal share are taken or left together "
        "(default 0.15; 0: cut as soon as --coverage is reached)",
    )
    cap.add_argument("--budget-ms", type=float, default=100.0, help="time spent timing each call group")
    cap.add_argument(
        "--timing-processes",
        type=int,
        default=1,
        help="time every group in this many processes and keep the fastest (libraries pick algorithms per process)",
    )
    cap.add_argument("--dtype", default=None, help="override the dtype (default: the entry's, per device)")
    cap.add_argument("--name", default=None, help="source name for module:factory (default: the module's name)")
    cap.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="e.g. capture.workload.batch_size=8"
    )
    cap.set_defaults(handler=capture)


def capture(args: argparse.Namespace) -> int:
    import torch

    from harness.capture import CUT_GAP, capture
    from harness.capture.replay import ReplaySettings
    from harness.capture.sources import dtype_of, from_builtin, from_factory
    from harness.tasks import TASKS_ROOT

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ForgeBenchError("--device cuda: this machine has no CUDA device; pass --device cpu.")
    if ":" in args.model and args.override:
        raise ForgeBenchError("--override sets conf/capture/ entries; a module:factory model takes none.")
    if ":" in args.model:
        workload = from_factory(args.model, args.name, device, dtype_of(args.dtype) if args.dtype else None)
    else:
        workload = from_builtin(args.model, device, args.dtype, args.override)
    out = Path(args.out) if args.out else TASKS_ROOT
    cut_gap = CUT_GAP if args.cut_gap is None else args.cut_gap
    command = " ".join(
        ["forgebench capture", f"--model {args.model}", f"--device {device.type}", f"--out {out}"]
        + [f"--coverage {args.coverage}", f"--min-share {args.min_share}", f"--budget-ms {args.budget_ms}"]
        + [f"--timing-processes {args.timing_processes}"]
        + [f"--cut-gap {cut_gap}"]
        + [f"--{k} {v}" for k, v in (("name", args.name), ("dtype", args.dtype)) if v]
        + [f"--override {o}" for o in args.override]
    )
    if args.timing_processes < 1:
        raise ForgeBenchError(f"--timing-processes {args.timing_processes}: give 1 or more processes.")
    settings = ReplaySettings(budget_ms=args.budget_ms, warmup_ms=args.budget_ms / 5, processes=args.timing_processes)
    result, manifest = capture(
        workload, device, out, args.min_share, args.coverage, settings, command, progress=print, cut_gap=cut_gap
    )
    print(
        f"{len(result.tasks)} tasks and {len(result.fused_tasks)} fused tasks from {result.calls} calls "
        f"in {len(result.groups)} groups, covering "
        f"{result.coverage:.1%} of {result.total_ms:.4g} ms "
        f"{'estimated (meta: nothing ran)' if device.type == 'meta' else 'replayed on ' + device.type}; {manifest}"
    )
    drop = result.cut["drop"]
    if result.cut["by"] == "min_share" and cut_gap and drop is not None and drop < cut_gap:
        print(
            f"note: the tasks end at --min-share {args.min_share}, where the next group is only {drop:.1%} below "
            "the last one taken: a second capture may take or leave it (the manifest's below_cut lists it); "
            "a lower --min-share moves the end to a gap."
        )
    return 0
