"""`forgebench tasks list | validate`: the tasks under tasks/, and each checked (its reference run once)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from harness.errors import ForgeBenchError, first_line


def add(sub) -> None:
    tasks = sub.add_parser("tasks", help="list or validate tasks").add_subparsers(dest="action", required=True)
    listing = tasks.add_parser("list", help="the tasks under tasks/ (or those a pattern selects)")
    listing.add_argument("--tasks", default=None, help="id pattern, source, or path to KernelBench files")
    listing.set_defaults(handler=list_tasks)
    validate = tasks.add_parser("validate", help="check every task.yaml and reference.py")
    validate.add_argument("paths", nargs="*", help="task folders, tasks roots, or KernelBench files (default: tasks/)")
    validate.add_argument(
        "--run",
        metavar="DEVICE",
        help="also run each reference once at its shapes on this device (harness/devices/: cpu, cuda)",
    )
    validate.set_defaults(handler=validate_tasks)


def list_tasks(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from harness.tasks import BrokenTask, select, survey

    if args.tasks:
        found = select(args.tasks, keep_broken=True)
    else:
        tasks, broken = survey()
        found = [*tasks, *broken]
    rows = [
        (t.id, t.source, t.operator or "?", t.shapes, ",".join(t.dtypes))
        for t in found
        if not isinstance(t, BrokenTask)
    ]
    print(tabulate(rows, headers=["id", "source", "operator", "shapes", "dtypes"], tablefmt="github"))
    for task in found:
        if isinstance(task, BrokenTask):
            print(f"forgebench: task '{task.id}' is broken and left out: {task.reason}", file=sys.stderr)
    return 0


def validate_tasks(args: argparse.Namespace) -> int:
    from harness.tasks import TASKS_ROOT, load_kernelbench_file, load_task_dir
    from harness.trace import signature

    roots = [Path(p) for p in args.paths] or [TASKS_ROOT]
    targets = (
        [p.parent for root in roots for p in sorted(root.rglob("task.yaml"))]
        if all(r.is_dir() for r in roots)
        else roots
    )
    if args.run:
        _check_device(args.run)
    problems = skipped = 0
    for target in targets:
        try:
            task = load_task_dir(target) if target.is_dir() else load_kernelbench_file(target)
            signature(task)
            if args.run:
                missing = _run_reference(task, args.run)
                if missing:
                    skipped += 1
                    print(f"skipped: task '{task.id}' calls {missing}, which has no {args.run} kernel in this torch.")
        except ForgeBenchError as exc:
            problems += 1
            print(f"error: {exc}")
    ran = f" (each reference run once on {args.run}" + (f"; {skipped} not runnable there)" if skipped else ")")
    print(f"{len(targets) - problems} of {len(targets)} tasks valid{ran if args.run else ''}")
    return 1 if problems else 0


def _check_device(device: str) -> None:
    from harness import devices

    if device not in devices.names():
        raise ForgeBenchError(
            f"tasks validate --run {device}: no device adapter has that name; use one of {', '.join(devices.names())}."
        )
    absent = devices.load(device).available()
    if absent:
        raise ForgeBenchError(f"tasks validate --run {device}: {absent}; use --run cpu.")


def _run_reference(task, device: str) -> str | None:
    """Build the reference and its inputs on `device` and run one forward, at the recorded shapes.
    Returns the op, when one has no kernel for the device (a cuDNN attention on the CPU)."""
    import torch

    from harness import devices
    from harness.tasks import load_reference_module

    adapter = devices.load(device)
    module = load_reference_module(task.reference_path, f"forgebench_validate_{task.id}")
    try:
        with adapter.torch_device(), torch.no_grad():
            inputs = list(module.get_inputs())
            if task.shapes and [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)] != task.shapes:
                raise ForgeBenchError(f"task '{task.id}': get_inputs() shapes differ from task.yaml's shapes.")
            module.Model(*module.get_init_inputs())(*inputs)
            adapter.synchronize()
    except NotImplementedError as exc:
        missing = re.match(r"Could not run '([\w:.]+)' with arguments from the '\w+' backend", str(exc))
        if missing:
            return missing.group(1)
        raise ForgeBenchError(f"task '{task.id}': its reference fails on {device}: {_first_line(exc)}") from exc
    except ForgeBenchError:
        raise
    except Exception as exc:  # a reference is user code: any failure is a finding about the task
        raise ForgeBenchError(f"task '{task.id}': its reference fails on {device}: {_first_line(exc)}") from exc
    finally:
        adapter.empty_cache()


def _first_line(exc: BaseException) -> str:
    return first_line(str(exc)) or type(exc).__name__
