"""The graph pass alone, on small modules: a chain is replaced only where the model makes exactly
the task's calls and reads none of their intermediate results; otherwise it says why."""

import importlib.util
import textwrap

import torch

from harness.integrate import guard
from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.signature import task_call

CHAIN = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x0, x1):
        t0 = torch.ops.aten.add.Tensor(x0, x1)
        return torch.ops.aten.relu.default(t0)


def get_inputs():
    return [torch.randn(8, 16), torch.randn(8, 16)]


def get_init_inputs():
    return []
"""


class AddRelu(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b) * 2


class AddReluReused(torch.nn.Module):
    def forward(self, a, b):
        y = a + b
        return torch.relu(y) + y  # the add's result is read outside the chain


class Fused(torch.nn.Module):
    def forward(self, x0, x1):
        return torch.clamp_min(x0 + x1, 0)


def _kernel(tmp_path) -> Kernel:
    path = tmp_path / "reference.py"
    path.write_text(textwrap.dedent(CHAIN))
    spec = importlib.util.spec_from_file_location("chain_reference", path)
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    return Kernel("add_relu", task_call(reference, reference.get_inputs()), Fused())


def test_a_chain_is_replaced_where_the_model_makes_it(tmp_path):
    kernel, a, b = _kernel(tmp_path), torch.randn(8, 16), torch.randn(8, 16)
    patch = Patch([kernel])
    with torch.no_grad():
        assert torch.equal(patch.compile(AddRelu())(a, b), AddRelu()(a, b))
    assert patch.hits == {"add_relu": 1} and patch.replaced == 1


def test_a_chain_whose_intermediate_the_model_reads_is_left_and_the_reason_said(tmp_path):
    kernel, a, b = _kernel(tmp_path), torch.randn(8, 16), torch.randn(8, 16)
    recorded, left_open = guard.record(AddReluReused(), lambda compiled: compiled(a, b), [kernel])
    assert recorded == {"add_relu": []}
    assert "also reads the result of aten.add.Tensor" in left_open["add_relu"]
    decision = guard.decide(kernel, recorded["add_relu"], {}, torch.device("cpu"), 50.0, left_open.get("add_relu"))
    assert decision.decision == "not_integrable"


def test_another_shape_or_dtype_stays_pytorch_s(tmp_path):
    kernel = _kernel(tmp_path)
    patch = Patch([kernel])
    compiled = patch.compile(AddRelu())
    with torch.no_grad():
        for a, b in [
            (torch.randn(4, 16), torch.randn(4, 16)),
            (torch.randn(8, 16).double(), torch.randn(8, 16).double()),
        ]:
            assert torch.equal(compiled(a, b), AddRelu()(a, b))
    assert not patch.hits and patch.replaced == 0 and patch.unmatched == 2


def test_a_kernel_that_raises_falls_back_to_the_task_s_calls(tmp_path):
    kernel = _kernel(tmp_path)

    class Broken(torch.nn.Module):
        def forward(self, x0, x1):
            raise RuntimeError("no such kernel")

    kernel.module = Broken()
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    patch = Patch([kernel])
    with torch.no_grad():
        assert torch.equal(patch.compile(AddRelu())(a, b), AddRelu()(a, b))
    assert patch.fallbacks == {"add_relu": 1} and "no such kernel" in patch.errors["add_relu"]
