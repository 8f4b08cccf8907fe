"""Where the bare graph pass's time over eager goes on a built-in model: eager, the graph as
`forgebench e2e` runs it (writes in place, calls bound), the graph with each of those steps left
out, and torch.compile's aot_eager (the same trace, run by AOTAutograd as FX code), timed as the
model run times them (timing.measure, no GPU lead); the graph's calls by op against eager's;
then torch.profiler's busiest ATen ops of one forward, eager against the bare graph.
(In one model run on the H200, ResNet-50's bare pass took 5.68 ms against eager's 4.07
on the H200.)

    python benchmarks/graph_overhead_probe.py [MODEL [OVERRIDE ...]]   (default resnet50, on cuda)
"""

import sys
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness import devices
from harness.capture.sources import from_builtin
from harness.evaluate import timing
from harness.integrate.graph_patch import Patch
from harness.integrate.traced import Traced


class _OpCounter(TorchDispatchMode):
    """Eager's ATen calls by op, as they reach the dispatcher's Python mode (the trace's level)."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[str(func)] += 1
        return func(*args, **(kwargs or {}))


def main(name: str, overrides: list[str]) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    adapter = devices.of(device)
    timing.bind_clocks(adapter)
    torch.set_grad_enabled(False)
    torch.backends.cudnn.benchmark = True
    work = from_builtin(name, device, None, overrides)

    def timed(fn):
        t = timing.measure(lambda: fn(), [[]], adapter, budget_ms=400, warmup_ms=80, gpu_lead=False)
        return f"{t.median_ms:8.3f} ms (p20 {t.p20_ms:.3f}, p80 {t.p80_ms:.3f}), host {t.host_ms:.3f} ms"

    traced = Traced(work.model)
    in_place = Patch._in_place
    variants = {
        "as e2e runs it (in place, bound)": in_place,
        "functional, calls through torch.ops": lambda self, gm: gm.recompile(),
    }
    runs = {"eager": work.run}
    bare = None
    for label, step in variants.items():
        Patch._in_place = step
        patch = Patch([])
        run = traced.using(patch)
        runs[label] = (lambda r: lambda: r(*work.inputs))(run)
        runs[label]()  # the pass runs at the first call, with this variant's step
        bare = bare or patch
    Patch._in_place = in_place
    for label, fn in runs.items():
        print(f"{label:40s} {timed(fn)}", flush=True)
    ((_, gm),) = bare._passed.items()
    ops = Counter(str(getattr(n.target, "op", n.target)) for n in gm.graph.nodes if n.op == "call_function")
    eager_ops = _OpCounter()
    with eager_ops:
        work.run()
    # Where the graph makes more calls than eager (Qwen3.5 on the H200: 8,740 against 5,539).
    print(
        f"calls: graph {sum(ops.values())}, eager {sum(eager_ops.calls.values())}; graph, eager, op (most added first):"
    )
    for op in sorted(set(ops) | set(eager_ops.calls), key=lambda o: eager_ops.calls[o] - ops[o])[:30]:
        print(f"  {ops[op]:6d} {eager_ops.calls[op]:6d} {op}")
    torch._dynamo.reset()
    plain = torch.compile(work.model, backend="aot_eager", dynamic=False)
    plain(*work.inputs)
    print(f"{'torch.compile aot_eager':40s} {timed(lambda: plain(*work.inputs))}", flush=True)

    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for label in ("eager", "as e2e runs it (in place, bound)"):
        for _ in range(3):
            runs[label]()
        adapter.synchronize()
        with profile(activities=activities) as prof:
            for _ in range(5):
                runs[label]()
            adapter.synchronize()
        print(f"\n== {label}: 5 forwards")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=60))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "resnet50", sys.argv[2:])
