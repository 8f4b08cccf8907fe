"""The referee on a GPU, beside the worker's own timer it replaced: legitimate kernels and planted
attacks evaluated with the referee (referee.py: the host's clock over batches of calls, outputs read
through CUDA IPC) and, for the legitimate ones, with the in-worker protocol of before (CUDA events
with a GPU lead, inside the candidate's process), on the same evaluator, one after the other.

    python3 benchmarks/referee_gpu_probe.py   # on the H200, from the repository root

Prints one line per evaluation: the protocol, verdict, speedup over eager (with the rounds' p20-p80
where refereed), the kernel's and eager's time per call, the batch, calls judged, and wall seconds.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from harness import devices
from harness.config import compose, instantiate
from harness.evaluate import Evaluator
from harness.evaluate.settings import EvalSettings
from harness.tasks import resolve_one

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


def _line(protocol: str, name: str, r, wall_s: float) -> str:
    if not r.correct:
        return f"{protocol:9} {name:34} {r.verdict:10} {r.reason[:110]}"
    spread = f" ({r.speedup_vs_eager_p20:.3g}-{r.speedup_vs_eager_p80:.3g})" if r.speedup_vs_eager_p20 else ""
    return (
        f"{protocol:9} {name:34} {r.verdict:10} {r.speedup_vs_eager:.3g}x{spread}; kernel {r.time_ms:.4g} ms, "
        f"eager {r.baselines['eager']:.4g} ms; batch {r.phases.get('batch', '-')}, "
        f"{r.calls_checked or '-'} judged; {wall_s:.1f} s"
    )


def evaluators() -> dict[str, Evaluator]:
    """An evaluator per platform, eager its only baseline, in folders of their own."""
    found = {}
    for platform in ("triton", "cuda"):
        root = Path(tempfile.mkdtemp(prefix=f"referee-{platform}-"))
        root.chmod(0o711)
        entry = instantiate(compose(platform=platform, overrides=["platform.baselines=[eager]"]).platform, "platform")
        found[platform] = Evaluator(entry, EvalSettings(budget_ms=100), root / "work", root / "cache")
    return found


def main() -> None:
    found = evaluators()
    cuda = devices.load("cuda")
    for platform, task_id, name in LEGITIMATE:
        task = resolve_one(task_id)
        for protocol in ("referee", "referee", "in-worker"):
            cuda.refereed = protocol == "referee"
            start = time.perf_counter()
            r = found[platform].evaluate(task, _source(name))
            print(_line(protocol, f"{name} ({task_id})", r, time.perf_counter() - start), flush=True)
    cuda.refereed = True
    for name in PLANTED:
        start = time.perf_counter()
        r = found["triton"].evaluate(resolve_one("rmsnorm_bf16_qwen"), _source(name))
        print(_line("referee", name, r, time.perf_counter() - start), flush=True)


if __name__ == "__main__":
    main()
