"""Whether the model run itself slows the graph pass as it goes: `forgebench e2e`'s model run
(model_run.run) on a request it wrote, in this process, with eager and a fresh bare graph pass
over the run's own trace timed at each phase, beside the Python GC's time and the process's
live objects and device memory; then cProfile of bare forwards at the end. (On the H200,
ResNet-50's bare pass took 5.68 ms in the model run, 4.07 ms in graph_overhead_probe.py, a fresh
process, against eager's 4.07 ms in both.)

    python benchmarks/e2e_phase_probe.py OUT/request.json     (after `forgebench e2e ... --out OUT`)
"""

import cProfile
import gc
import json
import pstats
import sys
import time
from pathlib import Path

import torch

from harness.evaluate import timing
from harness.integrate import model_run
from harness.integrate.graph_patch import Patch

_gc_ms = [0.0]
_gc_started = [0.0]


def _gc_clock(phase, info):
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        _gc_ms[0] += (time.perf_counter() - _gc_started[0]) * 1e3


def main(path: str) -> None:
    request = json.loads(Path(path).read_text())
    request["result_path"] = "/tmp/e2e_phase_probe.json"
    gc.callbacks.append(_gc_clock)
    seen: dict = {}
    original_traced, original_phase = model_run.Traced, model_run._Phases.__call__
    original_workload = model_run.workload

    def traced(model):
        made = original_traced(model)
        seen.setdefault("traced", made)
        return made

    def workload(*args):
        seen["work"] = original_workload(*args)
        return seen["work"]

    def measure_now(label: str) -> None:
        work, made = seen.get("work"), seen.get("traced")
        if work is None or made is None or not made.graphs or "compil" in label:
            return  # before the trace; or inside torch.compile's timing, which a retrace would disturb
        device = torch.device(request["device"])
        bare = made.using(Patch([]))
        call = (lambda: bare(**work.inputs)) if isinstance(work.inputs, dict) else (lambda: bare(*work.inputs))
        call()
        row = []
        for name, fn in (("eager", work.run), ("bare", call)):
            _gc_ms[0] = 0.0
            t = timing.measure(lambda fn=fn: fn(), [[]], device, budget_ms=300, warmup_ms=60, gpu_lead=False)
            row.append(f"{name} {t.median_ms:.3f} ms (host {t.host_ms:.3f}, gc {_gc_ms[0] / t.runs:.3f} ms a run)")
        memory = torch.cuda.memory_allocated() / 2**20 if torch.cuda.is_available() else 0.0
        print(
            f"[probe] {label[:60]:60s} | {' | '.join(row)} | objects {len(gc.get_objects())} | device MiB {memory:.0f}",
            flush=True,
        )
        seen["last_bare"] = call

    def phase(self, what, found=None):
        original_phase(self, what, found)
        measure_now(what)

    model_run.Traced, model_run.workload, model_run._Phases.__call__ = traced, workload, phase
    found = model_run.run(request)
    measure_now("after the run")
    print({k: round(v["median_ms"], 3) for k, v in found["timings"].items()})
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(50):
        seen["last_bare"]()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main(sys.argv[1])
