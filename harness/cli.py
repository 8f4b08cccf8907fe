"""The one CLI: `forgebench run | eval | tasks | capture | leaderboard | compare | site`."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from harness.errors import ForgeBenchError


def _eval(args: argparse.Namespace) -> int:
    from harness.config import compose, instantiate
    from harness.evaluate import Evaluator
    from harness.evaluate.settings import for_run
    from harness.tasks import resolve_one

    candidate = Path(args.candidate)
    if not candidate.is_file():
        raise ForgeBenchError(
            f"candidate file '{candidate}' does not exist; pass the path of a .py file defining ModelNew."
        )
    cfg = compose(platform=args.platform, overrides=args.override)
    task = resolve_one(args.task)
    platform = instantiate(cfg.platform, "platform")
    evaluator = Evaluator(
        platform,
        for_run(cfg),
        Path(cfg.run_root) / "eval" / time.strftime("%Y%m%d-%H%M%S"),
        Path(cfg.cache_dir),
    )
    result = evaluator.evaluate(task, candidate.read_text())
    print(result.to_json() if args.json else _describe(result))
    return 0


def _describe(result) -> str:
    lines = [f"{result.task} on {result.platform}: {result.summary()}"]
    for name, ms in result.baselines.items():
        lines.append(f"  {name}: {ms:.4g} ms")
    if result.phases:
        lines.append("  phases: " + ", ".join(f"{k} {v:.2f}" for k, v in result.phases.items()))
    return "\n".join(lines)


def _tasks_list(args: argparse.Namespace) -> int:
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


def _tasks_validate(args: argparse.Namespace) -> int:
    from harness.tasks import TASKS_ROOT, load_kernelbench_file, load_task_dir
    from harness.trace import signature

    roots = [Path(p) for p in args.paths] or [TASKS_ROOT]
    targets = (
        [p.parent for root in roots for p in sorted(root.rglob("task.yaml"))]
        if all(r.is_dir() for r in roots)
        else roots
    )
    if args.run:
        from harness import devices

        if args.run not in devices.names():
            raise ForgeBenchError(
                f"tasks validate --run {args.run}: no device adapter has that name; "
                f"use one of {', '.join(devices.names())}."
            )
        absent = devices.load(args.run).available()
        if absent:
            raise ForgeBenchError(f"tasks validate --run {args.run}: {absent}; use --run cpu.")
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
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _capture(args: argparse.Namespace) -> int:
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


def _leaderboard(args: argparse.Namespace) -> int:
    from harness.record import check_experiment, check_store_exists, store
    from leaderboard.formats import FORMATS
    from leaderboard.table import RUN_LAYOUT, TASK_LAYOUT, by_task_set, per_task, select_runs, summarize, task_runs

    tracking_uri, experiment = store(args.tracking_uri, args.experiment)
    check_store_exists(tracking_uri)
    check_experiment(tracking_uri, experiment)
    if args.e2e:
        from leaderboard.e2e import LAYOUT, e2e_runs

        runs = e2e_runs(tracking_uri, experiment)
        if runs.empty:
            print(f"no e2e runs in {tracking_uri}; run `forgebench e2e` first.", file=sys.stderr)
        return _write_board(FORMATS[args.format](by_task_set(runs), LAYOUT), args.out)
    tasks = task_runs(tracking_uri, experiment)
    if tasks.empty:
        print(f"no ForgeBench runs in {tracking_uri}; run `pytest suite/` first.", file=sys.stderr)
    else:
        filters = {k: getattr(args, k) for k in ("suite", "model", "agent", "platform", "since")}
        tasks = select_runs(tasks, run=args.run_id, **filters)
    frame, layout = (per_task(tasks), TASK_LAYOUT) if args.per_task else (summarize(tasks), RUN_LAYOUT)
    return _write_board(FORMATS[args.format](by_task_set(frame), layout), args.out)


def _write_board(text: str, out: str | None) -> int:
    if out is None:
        print(text)
        return 0
    out = Path(out)
    if not out.parent.is_dir():
        raise ForgeBenchError(f"--out {out}: the folder {out.parent} does not exist; create it or name another file.")
    out.write_text(text + "\n")
    print(f"wrote {out}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from harness.record import check_experiment, check_store_exists, store
    from leaderboard.compare import FORMATS, compare_runs, latest_per_group, pick_runs
    from leaderboard.table import select_runs, task_runs

    if args.by and args.runs:
        raise ForgeBenchError("compare takes suite runs or --by, not both; drop the runs or the --by option.")
    tracking_uri, experiment = store(args.tracking_uri, args.experiment)
    check_store_exists(tracking_uri)
    check_experiment(tracking_uri, experiment)
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


def _site(args: argparse.Namespace) -> int:
    from harness.record import check_experiment, check_store_exists, store
    from leaderboard.site import build_site, load_site

    tracking_uri, experiment = store(args.tracking_uri, args.experiment)
    check_store_exists(tracking_uri)
    check_experiment(tracking_uri, experiment)
    out = Path(args.out)
    written = build_site(load_site(tracking_uri, experiment), out)
    print(f"wrote {len(written)} pages under {out}; open {out / 'index.html'}")
    return 0


def _e2e(args: argparse.Namespace) -> int:
    from harness.integrate.e2e import run_e2e
    from harness.integrate.e2e_report import describe
    from harness.record import store

    tracking_uri, experiment = store(args.tracking_uri, args.experiment)
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
    )
    print(describe(found))
    return 0


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _export(args: argparse.Namespace) -> int:
    from harness.integrate.bundle import export
    from harness.integrate.e2e import latest_e2e
    from harness.record import store

    tracking_uri, experiment = store(args.tracking_uri, args.experiment)
    out = export(latest_e2e(args.run, args.model, tracking_uri, experiment), Path(args.out))
    print(f"wrote the bundle {out} (manifest.json, kernels/, references/, SHA256SUMS)")
    return 0


def _regrade(args: argparse.Namespace) -> int:
    from harness.regrade import main

    return main(args)


def parser() -> argparse.ArgumentParser:
    """The command line, built without importing torch, MLflow or any command's modules: each handler
    imports what it needs, so `forgebench --help` and a mistyped option answer at once."""
    top = argparse.ArgumentParser(prog="forgebench", description="Benchmark LLM-written kernels against PyTorch.")
    sub = top.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="build, check and time one candidate; prints an EvalResult")
    ev.add_argument("--task", required=True, help="task id, task folder, or KernelBench-format .py file")
    ev.add_argument("--candidate", required=True, help="Python file defining ModelNew")
    ev.add_argument("--platform", default="cpu", help="cpu, cuda or triton (conf/platform/)")
    ev.add_argument("--json", action="store_true", help="print the EvalResult as JSON")
    ev.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a Hydra override")
    ev.set_defaults(handler=_eval)

    tasks = sub.add_parser("tasks", help="list or validate tasks").add_subparsers(dest="action", required=True)
    listing = tasks.add_parser("list", help="the tasks under tasks/ (or those a pattern selects)")
    listing.add_argument("--tasks", default=None, help="id pattern, source, or path to KernelBench files")
    listing.set_defaults(handler=_tasks_list)
    validate = tasks.add_parser("validate", help="check every task.yaml and reference.py")
    validate.add_argument("paths", nargs="*", help="task folders, tasks roots, or KernelBench files (default: tasks/)")
    validate.add_argument(
        "--run",
        metavar="DEVICE",
        help="also run each reference once at its shapes on this device (harness/devices/: cpu, cuda)",
    )
    validate.set_defaults(handler=_tasks_validate)

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
    cap.set_defaults(handler=_capture)

    regr = sub.add_parser("regrade", help="grade a folder of KernelBench-format solutions against their problems")
    regr.add_argument("solutions", metavar="DIR", help="solution .py files named like their problems or in runs layout")
    regr.add_argument(
        "--problems",
        default=os.path.join(os.environ.get("FORGEBENCH_SHARED", "../shared"), "data", "kernelbench"),
        help="KernelBench's problems (level folders); default: ../shared/data/kernelbench",
    )
    regr.add_argument("--platform", default="cpu", help="cpu, cuda or triton (conf/platform/)")
    regr.add_argument("--jobs", type=int, default=None, help="builds at once (default: the cores)")
    regr.add_argument("--report", default=None, metavar="FILE", help="the report's .md (a .json beside it)")
    regr.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a Hydra override")
    regr.set_defaults(handler=_regrade)

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
    e2e.set_defaults(handler=_e2e)
    exp = sub.add_parser("export", help="the kernels an e2e run kept, as a bundle with a manifest and checksums")
    exp.add_argument("--run", required=True, help="the suite run (MLflow id or run_dir) that e2e ran on")
    exp.add_argument("--model", required=True, help="the model e2e ran")
    exp.add_argument("out", metavar="OUT", help="the bundle's folder")
    exp.set_defaults(handler=_export)

    # Listed for --help only: main() hands `run ...` to Hydra before this parser sees it.
    sub.add_parser(
        "run",
        help="the suite through Hydra: forgebench run [-m] KEY=VALUE ... [hydra/launcher=joblib] (sweeps)",
        add_help=False,
    )

    board = sub.add_parser("leaderboard", help="the leaderboard, one table per task set, from MLflow alone")
    board.add_argument("--run", dest="run_id", default=None, help="only this suite run (its id, or its first 6+)")
    board.add_argument("--per-task", action="store_true", help="one row per task instead of per suite run")
    board.add_argument("--e2e", action="store_true", help="the models with their kernels back in (forgebench e2e)")
    board.add_argument("--format", choices=["md", "json", "csv", "html"], default="md", help="default: md")
    board.add_argument("--out", default=None, metavar="FILE", help="write the table to FILE instead of stdout")
    board.add_argument("--suite", default=None, help="only runs of this suite (or task set, as the headings name it)")
    board.add_argument("--model", default=None, help="only runs of this model label (or litellm model string)")
    board.add_argument("--agent", default=None, help="only runs of this agent")
    board.add_argument("--platform", default=None, help="only runs on this platform")
    board.add_argument("--since", default=None, help="only runs started then or later: 2026-11-30 or an ISO time (UTC)")
    board.set_defaults(handler=_leaderboard)

    comp = sub.add_parser("compare", help="suite runs task by task: wins, losses, ties, paired geomean ratio")
    comp.add_argument("runs", nargs="*", metavar="RUN", help="suite run ids (or 6+ first characters); B..., against A")
    comp.add_argument(
        "--by", choices=["model", "agent"], default=None, help="the latest run of each model label or agent, per set"
    )
    comp.add_argument("--suite", default=None, help="only runs of this suite (or task set)")
    comp.add_argument("--any-set", action="store_true", help="allow runs of different task sets (shared tasks only)")
    comp.add_argument("--format", choices=["md", "json"], default="md", help="default: md")
    comp.set_defaults(handler=_compare)
    for command in (board, comp, e2e, exp):
        command.add_argument(
            "--tracking-uri", default=None, help="MLflow store (default: MLFLOW_TRACKING_URI or sqlite:///mlflow.db)"
        )
        command.add_argument("--experiment", default=None, help="MLflow experiment (default: forgebench)")

    site = sub.add_parser("site", help="a static site (leaderboards, charts, tree inspectors) from MLflow alone")
    site.add_argument("out", metavar="OUT", help="the folder to write (made if missing); open OUT/index.html")
    site.add_argument(
        "--tracking-uri", default=None, help="MLflow store (default: MLFLOW_TRACKING_URI or sqlite:///mlflow.db)"
    )
    site.add_argument("--experiment", default=None, help="MLflow experiment (default: forgebench)")
    site.set_defaults(handler=_site)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["run"]:  # Hydra parses its own command line (overrides, -m, hydra/launcher=...)
            from harness.sweep import main as sweep

            return sweep(argv[1:])
        args = parser().parse_args(argv)
        return args.handler(args)
    except ForgeBenchError as exc:
        print(f"forgebench: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
