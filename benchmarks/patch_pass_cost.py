"""What the graph pass costs over one trace: a model of N repeated blocks, each making the add +
ReLU chain a kernel takes, traced once (graph_patch.Traced), then a pass that replaces all N chains.
On the CPU machine, before the chain's calls were erased locally, the pass took 107 s at N=1000
(docs/results.md has the current figures).

    python benchmarks/patch_pass_cost.py [N ...]
"""

import sys
import time

import torch

from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.signature import task_call
from harness.integrate.traced import Traced


class AddRelu(torch.nn.Module):
    def forward(self, x0, x1):
        return torch.relu(x0 + x1)


class Blocks(torch.nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, a, b):
        for _ in range(self.n):
            a = torch.relu(a + b) * 0.5 + torch.sin(a) + torch.cos(b)
        return a


class Reference:
    """The task's reference, as a module of the KernelBench contract."""

    Model = AddRelu

    @staticmethod
    def get_inputs():
        return [torch.randn(8, 16), torch.randn(8, 16)]

    @staticmethod
    def get_init_inputs():
        return []


def main(sizes: list[int]) -> None:
    torch.set_grad_enabled(False)
    a, b = Reference.get_inputs()
    kernel = Kernel("add_relu", task_call(Reference, [a, b]), AddRelu())
    print(f"{'blocks':>7} {'graph calls':>12} {'trace s':>8} {'pass s':>8} {'replaced':>9} {'same as eager':>14}")
    for n in sizes:
        torch._dynamo.reset()
        traced, model = Traced(Blocks(n)), Blocks(n)
        started = time.perf_counter()
        traced.using(Patch([]))(a, b)
        trace_s = time.perf_counter() - started
        patch = Patch([kernel])
        started = time.perf_counter()
        out = traced.using(patch)(a, b)
        pass_s = time.perf_counter() - started
        same = torch.equal(out, model(a, b))
        print(f"{n:>7} {patch.graph_calls:>12} {trace_s:>8.2f} {pass_s:>8.2f} {patch.replaced:>9} {same!s:>14}")


if __name__ == "__main__":
    main([int(n) for n in sys.argv[1:]] or [100, 300, 1000])
