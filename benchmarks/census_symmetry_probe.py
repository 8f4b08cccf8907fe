"""The referee's census on the host, with and without its perf events: a C++ RMSNorm
(tests/candidates/rmsnorm_cpp.py) on rmsnorm_qwen, evaluated RUNS times as landed (eager's and the
blank's brackets observed as the candidate's are) and with no census at all. The two should read
alike; with the events on the candidate's side only it read 1.6x against 2.0x (docs/evaluation.md).

    .venv/bin/python -m benchmarks.census_symmetry_probe [RUNS]   # on the CPU machine
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from harness.config import compose, instantiate
from harness.evaluate import referee
from harness.evaluate.evaluator import Evaluator
from harness.evaluate.settings import EvalSettings
from harness.tasks import resolve_one

CANDIDATE = Path(__file__).resolve().parents[1] / "tests" / "candidates" / "rmsnorm_cpp.py"
_TAKE = referee.Session._take_census


def _no_census(session: referee.Session, own_roots) -> None:
    session.census_skipped = "probe"


def main(runs: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="census-probe-"))
    root.chmod(0o711)  # the worker, as nobody, must pass through
    entry = instantiate(compose(platform="cpu", overrides=["platform.baselines=[eager]"]).platform, "platform")
    evaluator = Evaluator(entry, EvalSettings(budget_ms=300), root / "work", root / "cache")
    task, source = resolve_one("rmsnorm_qwen"), CANDIDATE.read_text()
    for variant, take in (("landed", _TAKE), ("no census", _no_census)):
        referee.Session._take_census = take
        for _ in range(runs):
            start = time.perf_counter()
            r = evaluator.evaluate(task, source)
            print(
                f"{variant:9} {r.verdict:8} {r.speedup_vs_eager:.3f}x ({r.speedup_vs_eager_p20:.3f}-"
                f"{r.speedup_vs_eager_p80:.3f}); kernel {r.time_ms:.4g} ms, eager {r.baselines['eager']:.4g} ms; "
                f"{time.perf_counter() - start:.1f} s; census {r.census or r.checks_skipped.get('census')}",
                flush=True,
            )
    referee.Session._take_census = _TAKE


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
