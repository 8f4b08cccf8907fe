"""The model run's own failures said as such: a model whose traced graph fails where eager runs
is refused with a sentence before any kernel runs, so no kernel is blamed for it."""

import pytest
import torch

from harness.errors import ForgeBenchError
from harness.integrate import model_run


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
