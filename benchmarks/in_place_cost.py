"""What making a patched graph's writes in place again (integrate/in_place.py) costs once a pass,
and what it saves each forward: a model of N blocks, each writing its output one chunk at a time
(as Qwen3.5's chunked delta rule does), traced once; then the graph as the recording pass runs it
(functional: each chunk's write copies the whole output) and as every other pass runs it (the
writes in place), each against eager, side by side in one process.

    python benchmarks/in_place_cost.py [N ...]
"""

import statistics
import sys
import time

import torch

from harness.integrate.graph_patch import Patch
from harness.integrate.traced import Traced

CHUNKS, ROWS, WIDTH = 32, 64, 4096


class ChunkedBlocks(torch.nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            out = torch.zeros_like(x)
            for i in range(CHUNKS):
                out[:, i] = x[:, i] * 0.5 + 1.0
            x = torch.tanh(out)
        return x


def median_ms(fn, runs: int = 5) -> float:
    fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def row(n: int, x: torch.Tensor) -> str:
    torch._dynamo.reset()
    model, traced = ChunkedBlocks(n), Traced(ChunkedBlocks(n))
    traced.using(Patch([], record=True))(x)  # the trace
    functional, written = Patch([], record=True), Patch([])
    passes = []
    for patch in (functional, written):
        started = time.perf_counter()
        for graph in traced.graphs:
            patch.over(graph)
        passes.append(time.perf_counter() - started)
    out = traced.using(written)(x)
    same = torch.equal(out, model(x)) and written.reinplace_error is None
    eager_ms = median_ms(lambda: model(x))
    functional_ms = median_ms(lambda: traced.using(functional)(x))
    written_ms = median_ms(lambda: traced.using(written)(x))
    return (
        f"{n:>7} {written.graph_calls:>12} {passes[0]:>19.2f} {passes[1]:>17.2f} "
        f"{eager_ms:>9.1f} {functional_ms:>14.1f} {written_ms:>12.1f} {same!s:>5}"
    )


def main(sizes: list[int]) -> None:
    torch.set_grad_enabled(False)
    x = torch.randn(ROWS, CHUNKS, WIDTH)
    print(f"{'blocks':>7} {'graph calls':>12} {'pass s, functional':>19} {'pass s, in place':>17} "
          f"{'eager ms':>9} {'functional ms':>14} {'in place ms':>12} {'same':>5}")  # fmt: skip
    for n in sizes:
        print(row(n, x), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2, 8])
