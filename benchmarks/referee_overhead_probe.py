"""Where a refereed bracket's time goes on a GPU: legitimate kernels refereed as landed, without the
census (perf sampling of the candidate's threads), without the freezer (SIGSTOP between its calls),
and without both, each beside the kernel timed directly (referee_gpu_probe.direct); then each
variant's phases, the time per order from the referee's own account among them (reference_*_s,
candidate_*_s).

    python3 -m benchmarks.referee_overhead_probe [VARIANT ...]   # on the H200, from the repository root
"""

from __future__ import annotations

import sys
import time

from benchmarks.referee_gpu_probe import LEGITIMATE, _line, _source, direct, evaluators
from harness.evaluate import hands, referee
from harness.tasks import resolve_one

VARIANTS = {
    "landed": {},
    "no census": {"census": False},
    "no freezer": {"freezer": False},
    "neither": {"census": False, "freezer": False},
}
RUNS = 2  # evaluations per variant


def _set(census: bool = True, freezer: bool = True) -> None:
    referee.Session._take_census = _TAKE if census else lambda self, roots: setattr(self, "census_skipped", "probe")
    hands.Freezer.freeze = _FREEZE if freezer else lambda self: None


_TAKE, _FREEZE = referee.Session._take_census, hands.Freezer.freeze


def main(variants: list[str]) -> None:
    found = evaluators()
    for platform, task_id, name in LEGITIMATE[:2]:
        task = resolve_one(task_id)
        print(direct(task, _source(name)).replace("candidate", name), flush=True)
        for variant in variants:
            knobs = VARIANTS[variant]
            _set(**knobs)
            for _ in range(RUNS):
                start = time.perf_counter()
                r = found[platform].evaluate(task, _source(name))
                print(_line(variant[:9], name, r, time.perf_counter() - start), flush=True)
            print(f"    phases (s): { {k: round(v, 3) for k, v in r.phases.items()} }", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(VARIANTS))
