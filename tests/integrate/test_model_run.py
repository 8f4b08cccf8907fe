"""The model run's own failures said as such: a model whose traced graph fails where eager runs
is refused with a sentence before any kernel runs, so no kernel is blamed for it."""

import pytest
import torch

from harness.errors import ForgeBenchError
from harness.integrate import guard, model_run


class ResidualGroupNorm(torch.nn.Module):
    """A VAE's attention residual into a group norm. torch 2.13's own trace of it fails on the CPU
    (aot_eager: "Expected X.is_contiguous"): its fake strides say the sum is contiguous, the real
    ones are not, and the traced graph drops the contiguous() eager's group_norm makes."""

    def __init__(self):
        super().__init__()
        self.lin, self.conv, self.norm = (
            torch.nn.Linear(32, 32),
            torch.nn.Conv2d(32, 32, 3, padding=1),
            torch.nn.GroupNorm(8, 32),
        )

    def forward(self, x):
        r = self.conv(x)
        h = self.lin(r.view(1, 32, -1).transpose(1, 2)).transpose(-1, -2).reshape(1, 32, 24, 24)
        return self.norm((h + r) / 1)


def build_residual_group_norm():
    torch.manual_seed(0)
    return ResidualGroupNorm().eval(), (torch.randn(1, 32, 24, 24),)


def test_a_model_whose_traced_graph_fails_where_eager_runs_is_said_so_and_no_kernel_blamed(tmp_path):
    model, inputs = build_residual_group_norm()
    try:
        with torch.no_grad():
            torch.compile(model, backend="aot_eager")(*inputs)
        torch_fails = False
    except Exception:
        torch_fails = True
    torch._dynamo.reset()
    request = {
        "model": f"{__name__}:build_residual_group_norm",
        "device": "cpu",
        "tasks": [],
        "budget_ms": 10.0,
        "kernel_budget_ms": 5.0,
        "result_path": str(tmp_path / "model_run.json"),
        "compile": False,
    }
    if not torch_fails:  # a torch that traces it right: the run goes through
        assert model_run.run(request)["timings"]["patched_eager"]
        return
    with pytest.raises(
        ForgeBenchError, match=r"the model.s traced graph fails on cpu where eager runs .* no kernel can go in"
    ):
        model_run.run(request)


CHAIN = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x0, x1):
        return torch.ops.aten.relu.default(torch.ops.aten.add.Tensor(x0, x1))


def get_inputs():
    return [torch.randn({rows}, 16), torch.randn({rows}, 16)]


def get_init_inputs():
    return []
"""

FUSED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x0, x1):
        return torch.clamp_min(x0 + x1, 0)
"""


class TwoChains(torch.nn.Module):
    def forward(self, a, b, c, d):
        return torch.relu(a + b).sum() + torch.relu(c + d).sum()


def build_two_chains():
    torch.manual_seed(0)
    return TwoChains().eval(), (torch.randn(8, 16), torch.randn(8, 16), torch.randn(4, 16), torch.randn(4, 16))


def test_a_smaller_kept_set_is_weighed_on_the_same_pass_then_passed_and_timed_alone(tmp_path, monkeypatch):
    # Both kernels kept in place; with both in, the model is slower (the first verdict, forced):
    # the one that saved less is switched off on the same pass and the model timed again, then the
    # settled set gets a pass of its own. A pass over an LLM's graph takes a minute on the GPU's host.
    tasks = []
    for rows in (8, 4):
        reference, kernel = tmp_path / f"chain{rows}.py", tmp_path / f"kernel{rows}.py"
        reference.write_text(CHAIN.replace("{rows}", str(rows)))
        kernel.write_text(FUSED)
        tasks.append({"id": f"chain{rows}", "reference_path": str(reference), "kernel_path": str(kernel)})
    speeds = {"chain8": 0.5, "chain4": 0.9}

    def decide(kernel, calls, *args, **kwargs):
        return guard.Decision(
            kernel.task_id, "kept", "", len(calls), 1.0, speeds[kernel.task_id], 1.0 / speeds[kernel.task_id]
        )

    verdicts = iter([True])  # the first phase weighed is slower; every later one is not
    monkeypatch.setattr(guard, "decide", decide)
    monkeypatch.setattr(guard, "_no_gain", lambda run: next(verdicts, False))
    request = {
        "model": f"{__name__}:build_two_chains",
        "device": "cpu",
        "tasks": tasks,
        "budget_ms": 10.0,
        "kernel_budget_ms": 5.0,
        "result_path": str(tmp_path / "model_run.json"),
        "compile": False,
    }
    found = model_run.run(request)
    steps = [p.split(" s ", 1)[1] for p in found["phases"] if "kept kernels in place" in p]
    assert steps == [
        "passing the graph with 2 kept kernels in place",
        "timing the model with 2 kept kernels in place",
        "timing the model with 1 kept kernels in place",  # chain4 switched off, the same pass
        "passing the graph with 1 kept kernels in place",
        "timing the model with 1 kept kernels in place",
    ]
    by_id = {d["task_id"]: d for d in found["decisions"]}
    assert by_id["chain4"]["decision"] == "slower_in_model" and by_id["chain8"]["decision"] == "kept"
    assert found["hits_per_forward"] == {"chain8": 1} and found["max_output_error"] == 0.0
