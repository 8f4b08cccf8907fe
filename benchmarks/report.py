"""Figures for docs/results.md: turnaround per platform (new and cached source), timing
repeatability across fresh worker processes, and the harness's time against triton's do_bench.

From the repository root: `python3 benchmarks/report.py OUT.json` on the GPU machine (cuda and
triton), `python3 benchmarks/report.py OUT.json --cpu` on a CPU machine (turnaround only).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from harness.config import compose, instantiate
from harness.evaluate import EvalSettings, Evaluator
from harness.tasks import load_reference_module, resolve_one

TESTS = Path(__file__).resolve().parents[1] / "tests"
CANDIDATES = TESTS / "gpu"


def variant(source: str, platform: str, i: int) -> str:
    """The same kernel with a comment that changes its hash, so nothing is cached."""
    if platform == "cuda":
        return source.replace("#include <cuda_fp16.h>", f"#include <cuda_fp16.h>\n// variant {i}")
    if platform == "cpu":
        return source.replace("#include <cmath>", f"#include <cmath>\n// variant {i}")
    return source.replace("    row = tl.program_id(0)", f"    # variant {i}\n    row = tl.program_id(0)", 1)


def evaluator(platform: str, root: Path) -> Evaluator:
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o711)  # workers run as nobody under root
    cfg = compose(platform=platform, overrides=os.environ.get("PLATFORM_OVERRIDES", "").split())
    from omegaconf import OmegaConf

    return Evaluator(
        instantiate(cfg.platform, "platform"),
        EvalSettings(**OmegaConf.to_container(cfg.evaluate)),
        root / "work",
        root / "cache",
    )


def turnaround(platform: str, name: str, task_id: str, root: Path, n: int = 5) -> dict:
    ev = evaluator(platform, root / platform)
    task = resolve_one(task_id)
    start = time.perf_counter()
    ev.reference(task)
    reference_s = time.perf_counter() - start
    source = (CANDIDATES / name if platform != "cpu" else TESTS / "candidates" / name).read_text()
    fresh = [ev.evaluate(task, variant(source, platform, i)) for i in range(n)]
    cached = [ev.evaluate(task, variant(source, platform, 0)) for _ in range(n)]
    for r in fresh + cached:
        assert r.correct, r.reason
    return {
        "platform": platform,
        "task": task_id,
        "candidate": name,
        "reference_and_baselines_s": reference_s,
        "new_source_wall_s": [r.phases["wall_s"] for r in fresh],
        "cached_wall_s": [r.phases["wall_s"] for r in cached],
        "new_source_phases": median_phases(fresh),
        "cached_phases": median_phases(cached),
        "cached_build": [r.cached_build for r in cached],
        "time_ms": [r.time_ms for r in fresh + cached],
        "baselines": fresh[0].baselines,
        "baselines_skipped": fresh[0].baselines_skipped,
        "baselines_setup_s": fresh[0].baselines_setup_s,
        "speedups": fresh[0].speedups,
        "speedup_vs_eager": fresh[0].speedup_vs_eager,
        "speedup_vs_compile": fresh[0].speedup_vs_compile,
        "sol_fraction": fresh[0].sol_fraction,
        "env": fresh[0].env,
        "ceilings": ev.ceilings(),
    }


# The order phases happen in; "worker_start_s" is forking the worker and reading its record.
PHASES = ("worker_start_s", "inputs_s", "build_s", "check_s", "timing_s", "save_s", "compare_s", "wall_s")


def median_phases(results: list) -> dict[str, float]:
    """Each phase's median over the runs (a phase a run lacks is left out of its median)."""
    names = dict.fromkeys(n for r in results for n in r.phases)
    return {n: statistics.median(r.phases[n] for r in results if n in r.phases) for n in names}


def phase_table(t: dict) -> str:
    """Rows new/cached, a column per phase, seconds (median over the runs)."""
    names = [n for n in PHASES if n in t["new_source_phases"] or n in t["cached_phases"]]
    rest = [n for n in t["new_source_phases"] if n not in names]
    header = "  ".join(f"{n.removesuffix('_s'):>12s}" for n in names + rest)
    rows = [f"{'':8s}{header}"]
    for label, phases in (("new", t["new_source_phases"]), ("cached", t["cached_phases"])):
        rows.append(f"{label:8s}" + "  ".join(f"{phases.get(n, float('nan')):12.3f}" for n in names + rest))
    return "\n".join(rows)


def describe(t: dict) -> str:
    lines = [
        f"{t['platform']} {t['candidate']} on {t['task']}: new {statistics.median(t['new_source_wall_s']):.2f} s, "
        f"cached {statistics.median(t['cached_wall_s']):.2f} s (median wall); reference and baselines "
        f"{t['reference_and_baselines_s']:.1f} s",
        phase_table(t),
    ]
    for name, ms in t["baselines"].items():
        base = name.removesuffix("_ms")
        setup = t["baselines_setup_s"].get(base)
        lines.append(
            f"  {base:22s} {ms:.4f} ms  kernel {t['speedups'].get(base, float('nan')):.2f}x faster"
            + (f"  (built in {setup:.1f} s)" if setup is not None else "")
        )
    lines += [f"  {name:22s} skipped: {why}" for name, why in t["baselines_skipped"].items()]
    return "\n".join(lines)


def do_bench_reference(task_id: str, candidates: dict[str, str]) -> dict:
    """triton.testing.do_bench (median) of eager and each candidate, in this process."""
    import importlib.util

    from triton.testing import do_bench

    task = resolve_one(task_id)
    module = load_reference_module(task.reference_path)
    torch.manual_seed(101)
    inputs = [x.cuda() for x in module.get_inputs()]
    fns = {"eager": module.Model(*module.get_init_inputs()).cuda()}
    for label, name in candidates.items():
        spec = importlib.util.spec_from_file_location(f"bench_{label}", CANDIDATES / name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fns[label] = mod.ModelNew(*module.get_init_inputs()).cuda()
    with torch.no_grad():
        return {
            label: do_bench(lambda f=fn: f(*inputs), warmup=50, rep=300, return_mode="median")
            for label, fn in fns.items()
        }


def cpu_main(out: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        root.chmod(0o711)
        report = {"cpu": turnaround("cpu", "rmsnorm_cpp.py", "rmsnorm_qwen", root, n=5), "torch": torch.__version__}
    Path(out).write_text(json.dumps(report, indent=1))
    t = report["cpu"]
    print(f"cpu new {[round(x, 2) for x in t['new_source_wall_s']]} cached {[round(x, 2) for x in t['cached_wall_s']]}")
    print(describe(t))


def main(out: str) -> None:
    report: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "turnaround": []}

    def save(section: str) -> None:
        Path(out).write_text(json.dumps(report, indent=1))
        print(section, json.dumps(report[section])[:1500], flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        root.chmod(0o711)
        for args in (
            ("cuda", "softmax_cuda.py", "softmax_fp16_attn"),
            ("triton", "softmax_triton.py", "softmax_fp16_attn"),
            ("triton", "rmsnorm_triton.py", "rmsnorm_bf16_qwen"),
        ):
            report["turnaround"].append(turnaround(*args, root, n=3))
            save("turnaround")
        # Repeatability: the same kernel timed in 5 fresh worker processes.
        ev = evaluator("triton", root / "triton")
        task = resolve_one("softmax_fp16_attn")
        times = [ev.evaluate(task, (CANDIDATES / "softmax_triton.py").read_text()).time_ms for _ in range(5)]
        report["repeatability"] = {
            "kernel": "softmax_triton on softmax_fp16_attn",
            "time_ms": times,
            "spread": max(times) / min(times) - 1,
        }
        report["harness_vs_do_bench"] = {
            "softmax_fp16_attn": do_bench_reference(
                "softmax_fp16_attn", {"cuda": "softmax_cuda.py", "triton": "softmax_triton.py"}
            ),
            "rmsnorm_bf16_qwen": do_bench_reference("rmsnorm_bf16_qwen", {"triton": "rmsnorm_triton.py"}),
        }
    save("harness_vs_do_bench")
    for t in report["turnaround"]:
        print(describe(t))
        print(f"  kernel {statistics.median(t['time_ms']):.4f} ms, share of roofline {t['sol_fraction']}")
    print("repeatability", report["repeatability"])
    print("do_bench", report["harness_vs_do_bench"])


if __name__ == "__main__":
    (cpu_main if "--cpu" in sys.argv else main)(sys.argv[1])
