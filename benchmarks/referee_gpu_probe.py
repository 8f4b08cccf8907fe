"""The referee on a GPU, beside a direct timing: legitimate kernels and planted attacks evaluated by
the referee (referee.py: the host's clock over batches of calls, outputs read through CUDA IPC) and,
for the legitimate ones, timed directly in this process (triton.testing.do_bench: CUDA events, the
L2 flushed between calls; our own kernels, so no referee is needed), eager beside them.

    python3 benchmarks/referee_gpu_probe.py [NAME ...]   # on the H200, from the repository root

NAMEs pick some of the legitimate kernels and plants below (all when none is given).

Prints one line per evaluation: the protocol, verdict, speedup over eager (with the rounds' p20-p80
where refereed), the kernel's and eager's time per call, the batch, calls judged, and wall seconds.
The direct line is what the kernel does; a refereed speedup well below it is the protocol's cost.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from harness.config import compose, instantiate
from harness.evaluate import Evaluator
from harness.evaluate.settings import EvalSettings
from harness.tasks import Task, resolve_one

ROOT = Path(__file__).resolve().parents[1]
GPU, PLANTS = ROOT / "tests" / "gpu", ROOT / "tests" / "candidates" / "referee"
LEGITIMATE = [
    ("triton", "softmax_fp16_attn", "softmax_triton"),
    ("triton", "rmsnorm_bf16_qwen", "rmsnorm_triton"),
    ("cuda", "softmax_fp16_attn", "softmax_cuda"),
]
PLANTED = [  # appended to rmsnorm_triton.py
    "queues_work_to_slow_eager_triton",
    "rewrites_report_at_exit",
    "edits_the_harness_through_frames",
    "skips_random_calls",
    "memoizes_inputs",
    "overwrites_input_when_timed",
    "fills_output_when_copied",
]


def _source(name: str) -> str:
    for folder in (GPU, GPU / "candidates", PLANTS):
        if (folder / f"{name}.py").is_file():
            text = (folder / f"{name}.py").read_text()
            break
    return text if name in {n for *_, n in LEGITIMATE} else f"{(GPU / 'rmsnorm_triton.py').read_text()}\n\n{text}"


def _census(r) -> str:
    """Where the worker's host time went in its sampled rounds (census.py), by library: on a GPU
    this is diagnosis, and the line lets a legitimate kernel's shares be read beside a PyTorch one's."""
    shares = {k: v for k, v in r.census.items() if k not in ("samples", "eager_samples")}
    if not shares:
        return "census: none"
    return "census: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()) + f" of {int(r.census['samples'])}"


def _line(protocol: str, name: str, r, wall_s: float) -> str:
    if not r.correct:
        return f"{protocol:9} {name:34} {r.verdict:10} {r.reason[:110]}; {_census(r)}"
    spread = f" ({r.speedup_vs_eager_p20:.3g}-{r.speedup_vs_eager_p80:.3g})" if r.speedup_vs_eager_p20 else ""
    return (
        f"{protocol:9} {name:34} {r.verdict:10} {r.speedup_vs_eager:.3g}x{spread}; kernel {r.time_ms:.4g} ms, "
        f"eager {r.baselines['eager']:.4g} ms; batch {r.phases.get('batch', '-')}, "
        f"{r.calls_checked or '-'} judged; {wall_s:.1f} s; {_census(r)}"
    )


def direct(task: Task, source: str) -> str:
    """The kernel and eager timed in this process by triton.testing.do_bench, as a line."""
    import torch
    from triton.testing import do_bench

    from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
    from harness.reference import load_reference_module

    on = torch.device("cuda")
    reference = load_reference_module(task.reference_path)
    path = Path(tempfile.mkdtemp(prefix="direct-")) / "candidate.py"
    path.write_text(source)
    eager, kernel = build_model(reference.Model, reference, 0, on), None
    kernel = build_model(load_candidate(path).ModelNew, reference, 0, on)
    copy_parameters(eager, kernel)
    inputs = make_inputs(reference, 1, on)
    with torch.no_grad():
        e_ms, k_ms = (do_bench(lambda m=m: m(*inputs), warmup=25, rep=200) for m in (eager, kernel))
    return f"{'direct':9} {path.stem:34} {'-':10} {e_ms / k_ms:.3g}x; kernel {k_ms:.4g} ms, eager {e_ms:.4g} ms"


def evaluators() -> dict[str, Evaluator]:
    """An evaluator per platform, eager its only baseline, in folders of their own."""
    found = {}
    for platform in ("triton", "cuda"):
        root = Path(tempfile.mkdtemp(prefix=f"referee-{platform}-"))
        root.chmod(0o711)
        entry = instantiate(compose(platform=platform, overrides=["platform.baselines=[eager]"]).platform, "platform")
        found[platform] = Evaluator(entry, EvalSettings(budget_ms=100), root / "work", root / "cache")
    return found


def main(only: list[str]) -> None:
    found = evaluators()
    for platform, task_id, name in LEGITIMATE:
        if only and name not in only:
            continue
        task = resolve_one(task_id)
        print(direct(task, _source(name)).replace("candidate", name), flush=True)
        for _ in range(2):
            start = time.perf_counter()
            r = found[platform].evaluate(task, _source(name))
            print(_line("referee", f"{name} ({task_id})", r, time.perf_counter() - start), flush=True)
    for name in PLANTED:
        if only and name not in only:
            continue
        start = time.perf_counter()
        r = found["triton"].evaluate(resolve_one("rmsnorm_bf16_qwen"), _source(name))
        print(_line("referee", name, r, time.perf_counter() - start), flush=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
