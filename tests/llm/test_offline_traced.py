"""A torch reference without state, restated in its prompt as the aten calls it makes, served by the
offline model's GPU templates from those calls (checked under Triton's interpreter on a CPU)."""

import pytest
import torch
import torch.nn.functional as F

from harness.evaluate.checks import OpRecorder, compare, forbidden_ops
from harness.llm.base import extract_code
from harness.llm.offline.model import answer
from harness.llm.offline.prompt import parse_task
from harness.llm.offline.writers import gpu_plan
from harness.prompts import ATEN_GRAPH_LEAD, build_messages
from harness.tasks import load_kernelbench_file
from tests.llm.test_offline_gpu import HEADER, TRITON, load, scratch  # noqa: F401 (scratch: the autouse fixture `load` writes under)

# KernelBench-style references written in torch, at small shapes: the prompt restates each as the aten
# calls it makes (harness/trace.py), and the offline model writes its kernel from those calls.
TRACED = {
    "leaky_relu_init": (
        "    def __init__(self, negative_slope: float = 0.01):\n"
        "        super().__init__()\n        self.negative_slope = negative_slope\n\n"
        "    def forward(self, x):\n        return torch.nn.functional.leaky_relu(x, self.negative_slope)\n",
        "[torch.randn(8, 300)]",
        "[0.2]",
        "triton_pointwise",
    ),
    "swish_hardtanh": (
        "    def forward(self, x):\n        return F.hardtanh(x * torch.sigmoid(x), -0.5, 0.5)\n",
        "[torch.randn(4, 5, 70)]",
        "[]",
        "triton_pointwise",
    ),
    # SELU and ELU are aten.elu; near zero exp(x) - 1 cancels, so the inputs are drawn small too.
    "selu_elu_hardsigmoid": (
        "    def __init__(self, alpha: float = 1.0):\n        super().__init__()\n        self.alpha = alpha\n\n"
        "    def forward(self, x):\n"
        "        return torch.selu(x) + F.elu(x * 1e-3, self.alpha) + F.hardsigmoid(x * 4.0)\n",
        "[torch.randn(4, 300)]",
        "[0.7]",
        "triton_pointwise",
    ),
    "log_softmax": (
        "    def __init__(self, dim: int = 1):\n        super().__init__()\n        self.dim = dim\n\n"
        "    def forward(self, x):\n        return torch.log_softmax(x, dim=self.dim)\n",
        "[torch.randn(6, 100)]",
        "[1]",
        "triton_rows",
    ),
    # Prefix scans along the rows, one of them over a masked input (KernelBench's masked cumsum);
    # rows of 300 span several scan steps and end inside a power-of-two tile.
    "masked_cumsum_cumprod": (
        "    def __init__(self, dim: int = 1):\n        super().__init__()\n        self.dim = dim\n\n"
        "    def forward(self, x, mask):\n"
        "        return torch.cumsum(x * mask, dim=self.dim) + torch.cumprod(1.0 + x * 1e-3, dim=self.dim)\n",
        "[torch.randn(6, 300), torch.randint(0, 2, (6, 300)).bool()]",
        "[1]",
        "triton_rows",
    ),
    "matmul_transposed_a": (
        "    def forward(self, A, B):\n        return torch.matmul(A.T, B)\n",
        "[torch.randn(40, 24), torch.randn(40, 36)]",
        "[]",
        "triton_matmul",
    ),
}


def traced_reference(forward: str, inputs: str, init: str) -> str:
    return (
        HEADER
        + f"class Model(nn.Module):\n{forward}\n\n"
        + f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init}\n"
    )


@pytest.mark.parametrize("name", sorted(TRACED))
def test_a_torch_reference_is_served_from_the_aten_calls_its_prompt_restates(name, tmp_path):
    forward, inputs, init, family = TRACED[name]
    path = tmp_path / f"{name}.py"
    path.write_text(traced_reference(forward, inputs, init))
    task = load_kernelbench_file(path)
    prompt = build_messages(task, TRITON, "new", [])[-1]["content"]
    assert ATEN_GRAPH_LEAD in prompt and "torch.ops.aten." in prompt.split(ATEN_GRAPH_LEAD)[1]
    parsed = parse_task(prompt)
    assert gpu_plan(parsed).family.name == family
    source = extract_code(answer(prompt))
    assert source is not None, answer(prompt)
    candidate, reference = load(source, f"candidate_traced_{name}"), load(path.read_text(), f"reference_{name}")
    init_inputs = reference.get_init_inputs()
    for seed in (1, 2):
        torch.manual_seed(seed)
        args = reference.get_inputs()
        expected = reference.Model(*init_inputs)(*args)
        with OpRecorder() as recorder:
            got = candidate.ModelNew(*init_inputs)(*args)
        assert not forbidden_ops(recorder.ops), forbidden_ops(recorder.ops)
        mismatch = compare(expected, got)
        assert mismatch is None, f"{mismatch.reason}\n{source}"


def test_elu_keeps_its_relative_precision_near_zero(tmp_path):
    """ELU below zero is alpha * (exp(x) - 1), which cancels for an input drawn x0.001 as tanh's form does."""
    forward = "    def forward(self, x):\n        return F.elu(x, 0.7)\n"
    path = tmp_path / "elu.py"
    path.write_text(traced_reference(forward, "[torch.randn(8, 256)]", "[]"))
    source = extract_code(answer(build_messages(load_kernelbench_file(path), TRITON, "new", [])[-1]["content"]))
    candidate = load(source, "candidate_elu")
    x = torch.cat([-torch.rand(1024) * 1e-3, torch.linspace(-4, 4, 1020), torch.tensor([0.0, -0.2499, -0.25, -30.0])])
    x = x.reshape(8, 256)
    torch.testing.assert_close(candidate.ModelNew()(x), F.elu(x, 0.7), rtol=2e-6, atol=1e-12)


def test_a_reference_holding_parameters_gets_no_restatement(tmp_path):
    """Its weights are not constants: a kernel written from its calls would drop them."""
    forward = (
        "    def __init__(self):\n        super().__init__()\n        self.scale = nn.Parameter(torch.ones(30))\n\n"
        "    def forward(self, x):\n        return torch.relu(x) * self.scale\n"
    )
    path = tmp_path / "scaled.py"
    path.write_text(traced_reference(forward, "[torch.randn(4, 30)]", "[]"))
    prompt = build_messages(load_kernelbench_file(path), TRITON, "new", [])[-1]["content"]
    assert ATEN_GRAPH_LEAD not in prompt
    assert "no code block" not in answer(prompt) and extract_code(answer(prompt)) is None
