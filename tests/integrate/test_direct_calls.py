"""A pass's graph runs as code that calls each op's operator straight (direct_calls.py), with the
same results and the same dispatch as the `torch.ops` calls FX writes."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.integrate import direct_calls
from harness.integrate.graph_patch import Patch
from harness.integrate.traced import Traced


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x).view(4, 2, 8).transpose(0, 1)
        return torch.relu(h).sum(dim=1) * 0.5


class Calls(TorchDispatchMode):
    """The ATen ops dispatched while it is on, in order."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_the_graph_calls_each_operator_straight_with_eagers_results_and_the_same_dispatch():
    x = torch.randn(8, 8)
    traced, bare = Traced(Block()), Patch([])
    run = traced.using(bare)
    with torch.no_grad():
        got, want = run(x), Block()(x)
        ((key, passed),) = bare._passed.items()
        assert "torch.ops.aten" not in passed.code  # no lookups through torch's op namespaces
        assert torch.equal(got, want)
        # The graph's inputs as the trace hands them over (its parameters, then x).
        handed = []
        bare._passed[key] = lambda *args: handed.append(args) or passed(*args)
        run(x)
        # The code FX writes for the same graph, beside it: the same ops reach the dispatcher.
        written = direct_calls.as_written(passed)
        assert "torch.ops.aten" in written.code
        with Calls() as direct:
            ours = passed(*handed[0])
        with Calls() as through_ops:
            theirs = written(*handed[0])
    assert direct.ops and direct.ops == through_ops.ops
    assert len(ours) == len(theirs) and all(torch.equal(a, b) for a, b in zip(ours, theirs))
