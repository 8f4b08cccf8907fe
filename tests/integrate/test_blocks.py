"""Integration cost that does not grow with depth: each distinct block of a model is traced, matched
and rewritten once, and its repeats reuse that work (blocks.py)."""

import time

import torch

from harness.integrate import blocks, guard
from harness.integrate.graph_patch import Patch
from harness.integrate.traced import Traced
from tests.integrate.test_graph_patch import _kernel

WIDTH = 16


class Block(torch.nn.Module):
    """A residual block whose add + ReLU is the task's chain (8x16 inputs, as CHAIN's)."""

    def __init__(self):
        super().__init__()
        self.norm, self.proj = torch.nn.LayerNorm(WIDTH), torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        h = self.proj(self.norm(x))
        return torch.relu(x + torch.tanh(h) * 0.5)


class Stack(torch.nn.Module):
    def __init__(self, depth: int):
        super().__init__()
        self.stem, self.head = torch.nn.Linear(WIDTH, WIDTH), torch.nn.Linear(WIDTH, 4)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(depth))

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _integrate(model: torch.nn.Module, x: torch.Tensor, kernel) -> tuple[float, Patch]:
    """The integration phase of an e2e run: trace, record the kernel's activations, check it on
    them, confirm the kept set, and one pass with it in place; seconds it took, and that pass."""
    torch._dynamo.reset()
    started = time.perf_counter()
    traced = Traced(model)
    forward = lambda compiled: compiled(x)
    recorded, _, sites = guard.record(traced, forward, [kernel])
    assert guard.check(kernel, recorded[kernel.task_id], {}) is None
    decisions = [guard.Decision(kernel.task_id, "kept")]
    assert guard.confirm(traced, forward, [kernel], decisions, {}) == [kernel]
    patch = Patch([kernel])
    out = traced.using(patch)(x)
    elapsed = time.perf_counter() - started
    assert torch.allclose(out, model(x), atol=1e-6)
    assert patch.hits[kernel.task_id] == len(model.blocks) == sites[kernel.task_id]
    return elapsed, patch


def test_the_cost_of_integrating_a_model_of_8_blocks_is_within_1_5x_of_one_of_2(tmp_path):
    kernel = _kernel(tmp_path)
    torch.manual_seed(0)
    x = torch.randn(8, WIDTH)
    with torch.no_grad():
        _integrate(Stack(2), x, kernel)  # imports and Dynamo's first-use costs, paid by neither
        # The least of three each: a host shared with other work slows a run now and then, never speeds it.
        shallow = min(_integrate(Stack(2), x, kernel)[0] for _ in range(3))
        deep = min(_integrate(Stack(8), x, kernel)[0] for _ in range(3))
    assert deep < 1.5 * shallow, f"8 blocks took {deep:.3f} s to integrate, 2 blocks {shallow:.3f} s"


def test_repeats_share_one_trace_and_one_pass_and_the_code_around_them_runs_as_eager(tmp_path):
    kernel = _kernel(tmp_path)
    model, x = Stack(6), torch.randn(8, WIDTH)
    assert blocks.repeated(model) == list(model.blocks)
    torch._dynamo.reset()
    traced = Traced(model)
    with torch.no_grad():
        _integrate(model, x, kernel)
        traced.using(Patch([kernel]))(x)
    assert len(traced.graphs) == 1, "six blocks of one shape: one trace"
    assert "6 repeated blocks (Block; 1 distinct)" in traced.traced_as
    assert model.blocks[0].forward.__func__ is Block.forward  # the user's model is left as built
    # One leaf class repeated is no block: a model of two Linears is traced whole.
    assert blocks.repeated(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))) == []
    assert Traced(model, reuse_blocks=False).traced_as == "the whole model in one trace"
