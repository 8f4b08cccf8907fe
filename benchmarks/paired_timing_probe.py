"""How stable a refereed speedup is on a busy machine: one kernel evaluated RUNS times while another
process burns a core beside it (the 2-core CI machine with another job), each speedup the median of
eager and the kernel timed in alternating rounds (referee.py).

    .venv/bin/python benchmarks/paired_timing_probe.py [--runs 4] [--burners 1] [--task rmsnorm_qwen]

Prints each run's speedup with its rounds' 20th-80th percentiles, its time and eager's, and the spread
of the speedups (largest over smallest); the figures go in docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
from pathlib import Path

from harness.config import compose, instantiate
from harness.evaluate import Evaluator
from harness.evaluate.settings import EvalSettings
from harness.tasks import resolve_one

KERNEL = Path(__file__).resolve().parents[1] / "tests" / "candidates" / "rmsnorm_cpp.py"


def _burn() -> None:
    x = 0
    while True:
        x += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--burners", type=int, default=1)
    parser.add_argument("--task", default="rmsnorm_qwen")
    parser.add_argument("--candidate", type=Path, default=KERNEL)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="paired-"))
    root.chmod(0o711)
    platform = instantiate(compose(platform="cpu").platform, "platform")
    evaluator = Evaluator(platform, EvalSettings(), root / "work", root / "cache")
    task, source = resolve_one(args.task), args.candidate.read_text()
    evaluator.reference(task)
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(args.burners)]
    for burner in burners:
        burner.start()
    speedups = []
    try:
        for run in range(args.runs):
            r = evaluator.evaluate(task, source)
            assert r.correct, r.reason
            speedups.append(r.speedup_vs_eager)
            print(
                f"run {run + 1}: {r.speedup_vs_eager:.3g}x eager (rounds' p20-p80 {r.speedup_vs_eager_p20:.3g}-"
                f"{r.speedup_vs_eager_p80:.3g}); kernel {r.time_ms:.3g} ms, eager {r.baselines['eager']:.3g} ms; "
                f"{r.calls_checked} calls judged",
                flush=True,
            )
    finally:
        for burner in burners:
            burner.kill()
        evaluator.close()
    print(f"spread of the speedups (largest / smallest): {max(speedups) / min(speedups):.3f}")


if __name__ == "__main__":
    main()
