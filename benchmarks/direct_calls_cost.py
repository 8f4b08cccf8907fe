"""What calling each op's operator straight (integrate/direct_calls.py) saves a graph pass's
code: a small Qwen3.5 (benchmarks/tiny_qwen35.py: host-bound, so the calls' Python shows), traced
once, its bare pass run as FX writes it (`torch.ops.aten.X.default(...)`) and as bound, beside
eager, calls interleaved in one process. Needs transformers.

    python benchmarks/direct_calls_cost.py [ROUNDS]
"""

import statistics
import sys
import time

import torch

from benchmarks.tiny_qwen35 import build
from harness.integrate import direct_calls
from harness.integrate.graph_patch import Patch
from harness.integrate.traced import Traced


def main(rounds: int) -> None:
    model, inputs = build()
    model.eval()
    traced, bare = Traced(model), Patch([])
    run = traced.using(bare)
    with torch.no_grad():
        eager_out, bound_out = model(*inputs), run(*inputs)
        ((key, bound),) = bare._passed.items()
        written = direct_calls.as_written(bound)
        print(
            f"graph calls {sum(n.op == 'call_function' for n in bound.graph.nodes)}; tokens as eager's:",
            all(torch.equal(a, b) for a, b in zip(eager_out[:-1], bound_out[:-1])),
        )
        times = {"eager": [], "as written": [], "bound": []}
        for _ in range(rounds):
            for name, took in times.items():
                if name != "eager":
                    bare._passed[key] = bound if name == "bound" else written
                call = (lambda: model(*inputs)) if name == "eager" else (lambda: run(*inputs))
                started = time.perf_counter()
                call()
                took.append((time.perf_counter() - started) * 1e3)
    med = {name: statistics.median(took[5:]) for name, took in times.items()}
    print("median ms: " + ", ".join(f"{name} {ms:.3f}" for name, ms in med.items()))
    print(
        f"as written / eager {med['as written'] / med['eager']:.3f}; bound / eager {med['bound'] / med['eager']:.3f}; "
        f"bound / as written {med['bound'] / med['as written']:.3f}"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
