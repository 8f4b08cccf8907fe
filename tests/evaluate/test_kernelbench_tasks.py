"""KernelBench's problems as KernelBench runs them: ModelNew built under Model's seed, whatever its
parameters' layout, and a problem too large for the machine skipped up front with its sizes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.tasks import resolve_one


def _task(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return resolve_one(str(path))


LINEAR_TASK = """
import torch
from torch import nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)
    def forward(self, x):
        return self.fc(x)

def get_inputs():
    return [torch.randn(8, 32)]

def get_init_inputs():
    return []
"""

# Its parameters are laid out unlike Model's (one fused tensor), but built as KernelBench builds both:
# under the same seed, nn.Linear's own initialisation gives the same values.
OTHER_LAYOUT = """
import ctypes
import torch
from torch import nn
from harness.platforms.cpu import compile_cpp, ptr

lib = compile_cpp(r'''
extern "C" void linear(const float* x, const float* w, const float* b, float* y, long n, long k, long m) {
  for (long i = 0; i < n; ++i) for (long j = 0; j < m; ++j) {
    double acc = b[j];
    for (long t = 0; t < k; ++t) acc += (double)x[i * k + t] * w[j * k + t];
    y[i * m + j] = (float)acc;
  }
}
''')

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        fc = nn.Linear(32, 16)
        self.packed = nn.Parameter(torch.cat([fc.weight.detach().reshape(-1), fc.bias.detach()]))
    def forward(self, x):
        x = x.contiguous()
        w, b = self.packed[: 16 * 32].contiguous(), self.packed[16 * 32 :].contiguous()
        y = torch.empty(x.shape[0], 16)
        lib.linear(ptr(x), ptr(w), ptr(b), ptr(y), ctypes.c_long(x.shape[0]), ctypes.c_long(32), ctypes.c_long(16))
        return y
"""


def test_a_modelnew_with_other_parameters_is_built_as_kernelbench_builds_it(make_evaluator, tmp_path):
    task = _task(tmp_path, "linear_32", LINEAR_TASK)
    result = make_evaluator().evaluate(task, OTHER_LAYOUT)
    assert result.verdict == "correct", result.reason
    assert "KernelBench" in result.checks_skipped.get("weights", ""), result.checks_skipped


KERNELBENCH_LEVEL1 = Path(__file__).resolve().parents[3] / "shared" / "data" / "kernelbench" / "level1"


@pytest.mark.skipif(not KERNELBENCH_LEVEL1.is_dir(), reason="needs ../shared/data/kernelbench")
def test_a_kernelbench_task_too_large_for_this_machine_is_skipped_up_front_with_its_sizes(tmp_path):
    # 23_Softmax's published shapes: two 4096 x 393216 fp32 tensors, 6.4 GB each; CI has 24 GB.
    from tests.test_suite import suite

    done = suite(tmp_path, "--agent=oneshot", f"--tasks={KERNELBENCH_LEVEL1 / '23_Softmax.py'}", "-rs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout, done.stdout
    assert "task '23_Softmax' needs about 128.8 GB at its shapes" in done.stdout, done.stdout
    assert "Traceback" not in done.stdout + done.stderr
