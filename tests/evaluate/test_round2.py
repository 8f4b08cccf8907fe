"""Evaluation round 2 (issue 15): tolerances that fit the arithmetic, PyTorch ops under
evaluate.torch_ops, KernelBench's seeded construction, idle thread pools, and a worker that imports
only what it runs. Each candidate is written here against a task file of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import serial
from harness.errors import ForgeBenchError
from harness.evaluate import stdlib_copy, tolerance
from harness.evaluate.checks import compare
from harness.evaluate.report import WorkerReport
from harness.tasks import resolve_one

M, K = 64, 2**18  # a fp32 mat-vec whose eager sum rounds far more than a blocked one


class MatVec(torch.nn.Module):
    def forward(self, a, x):
        return torch.matmul(a, x)


def _bf16(array: np.ndarray) -> np.ndarray:
    """fp32 values as bf16 would hold them (the low 16 bits dropped)."""
    return (array.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def _blocked(a: np.ndarray, x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy((a.reshape(M, -1, 1024) * x.reshape(-1, 1024)).sum(-1).sum(-1).reshape(M, 1))


def test_a_blocked_sum_passes_the_fp64_bound_and_bf16_inputs_fail_it_by_far():
    torch.manual_seed(0)
    a, x = torch.randn(M, K), torch.randn(K, 1)
    eager = [MatVec()(a, x)]
    expected = tolerance.derive(MatVec(), [a, x], eager, None)
    assert expected.basis["basis"] == "fp64", expected.basis
    honest = _blocked(a.numpy(), x.numpy()[:, 0])
    # Against eager's output with the fixed bound, the honest kernel fails where eager rounds badly.
    assert compare(eager, [honest]) is not None
    assert compare(expected.outputs, [honest], None, expected.bounds) is None
    assert compare(expected.outputs, eager, None, expected.bounds) is None  # eager passes its own bound
    cheat = _blocked(_bf16(a.numpy()), _bf16(x.numpy()[:, 0]))
    mismatch = compare(expected.outputs, [cheat], None, expected.bounds)
    assert mismatch is not None
    # The element it names is outside its bound, and says by how much.
    times = float(mismatch.reason.split("(")[-1].split("x the bound")[0])
    assert times > 10, mismatch.reason


def test_an_op_that_flips_in_fp64_keeps_the_fixed_bound():
    class Sign(torch.nn.Module):
        def forward(self, x):
            return (x > 0.5).float() * x

    x = torch.full((64,), 0.5) + torch.randn(64) * 1e-9  # fp32 rounds these onto the threshold
    eager = [Sign()(x)]
    expected = tolerance.derive(Sign(), [x], eager, None)
    assert expected.bounds is None or compare(expected.outputs, eager, None, expected.bounds) is None


def _task(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return resolve_one(str(path))


MATMUL_TASK = """
import torch
from torch import nn

class Model(nn.Module):
    def forward(self, a, b):
        return a @ b

def get_inputs():
    return [torch.randn(384, 384), torch.randn(384, 384)]

def get_init_inputs():
    return []
"""

NUMPY_MATMUL = """
import numpy as np
import torch
from torch import nn

class ModelNew(nn.Module):
    def forward(self, a, b):
        # numpy's BLAS on its own thread pool, which spin-waits after its work unless told not to.
        return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
"""


def test_a_numpy_matmul_on_a_thread_pool_is_not_escaped_work(make_evaluator, tmp_path):
    task = _task(tmp_path, "matmul_384", MATMUL_TASK)
    result = make_evaluator().evaluate(task, NUMPY_MATMUL)
    assert result.verdict == "correct", result.reason
    assert result.tolerance.get("basis") == "fp64", result.tolerance  # the bound is recorded


CONV_TASK = """
import torch
from torch import nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
    def forward(self, x):
        return torch.relu(self.conv(x))

def get_inputs():
    return [torch.randn(2, 3, 16, 16)]

def get_init_inputs():
    return []
"""

CONV_AND_OWN_RELU = """
import ctypes
import torch
from torch import nn
from harness.platforms.cpu import compile_cpp, ptr

lib = compile_cpp(r'''
extern "C" void relu(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0; }
''')

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
    def forward(self, x):
        z = self.conv(x).contiguous()  # PyTorch's convolution, kept
        y = torch.empty_like(z)
        lib.relu(ptr(z), ptr(y), ctypes.c_long(z.numel()))
        return y
"""

ONLY_TORCH = """
import torch
from torch import nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
    def forward(self, x):
        return torch.relu(self.conv(x))
"""


def test_torch_ops_allow_grades_a_kept_convolution_and_rejects_pytorch_alone(make_evaluator, tmp_path):
    task = _task(tmp_path, "conv_relu", CONV_TASK)
    allow = make_evaluator(torch_ops="allow")
    kept = allow.evaluate(task, CONV_AND_OWN_RELU)
    assert kept.verdict == "correct", kept.reason
    assert "aten.convolution" in kept.torch_ops and kept.torch_ops_rule == "allow"
    alone = allow.evaluate(task, ONLY_TORCH)
    assert alone.verdict == "rejected" and "no kernel of its own" in alone.reason, alone.reason
    forbid = make_evaluator().evaluate(task, CONV_AND_OWN_RELU)
    assert forbid.verdict == "rejected" and "aten.convolution" in forbid.reason, forbid.reason


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


def test_a_forged_report_of_the_wrong_types_is_refused():
    good = WorkerReport("correct", timing=None).to_json()
    assert WorkerReport.from_json(good).verdict == "correct"
    for forged in (
        {"verdict": "correct", "timing": {"median_ms": "fast", "p20_ms": 1, "p80_ms": 1, "runs": 5}},
        {"verdict": "correct", "timing": {"median_ms": float("nan"), "p20_ms": 1, "p80_ms": 1, "runs": 5}},
        {"verdict": "correct", "baselines": {"eager": [1]}},
        {"verdict": "perfect"},
        [],
    ):
        with pytest.raises(serial.RecordError):
            WorkerReport.from_json(json.dumps(forged))


def test_the_worker_imports_none_of_the_orchestration():
    probe = (
        "import sys, harness.evaluate.worker; "
        "print([m for m in ('harness.evaluate.evaluator', 'harness.evaluate.sandbox', 'harness.evaluate.ncu', "
        "'harness.evaluate.zygote', 'harness.tasks', 'harness.config', 'litellm', 'mlflow') if m in sys.modules])"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]", loaded


CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"


def test_a_load_inline_candidate_is_correct_whoever_runs_the_harness(make_evaluator):
    # As root with Python in a folder nobody may enter (a pyenv in /root), the workers read the
    # standard library and Python.h from the harness's copy of them.
    result = make_evaluator().evaluate(resolve_one("rmsnorm_qwen"), (CANDIDATES / "rmsnorm_load_inline.py").read_text())
    assert result.verdict == "correct", result.reason


@pytest.mark.skipif(not stdlib_copy.needed(), reason="Python here is readable by the workers' user")
def test_a_worker_that_cannot_read_the_standard_library_is_the_harness_fault(make_evaluator, monkeypatch):
    monkeypatch.setattr(stdlib_copy, "needed", lambda: False)  # as the harness was before the copy
    evaluator = make_evaluator()
    with pytest.raises(ForgeBenchError, match="the harness's fault, not the candidate's"):
        evaluator.evaluate(resolve_one("rmsnorm_qwen"), (CANDIDATES / "rmsnorm_load_inline.py").read_text())


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


RELU_PROBLEM = """
import torch
from torch import nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 1024)]

def get_init_inputs():
    return []
"""

RELU_SOLUTION = """
import ctypes
import torch
from torch import nn
from harness.platforms.cpu import compile_cpp, ptr

lib = compile_cpp(r'''
extern "C" void relu(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0; }
''')

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu(ptr(x), ptr(y), ctypes.c_long(x.numel()))
        return y
"""


def test_regrade_grades_a_folder_of_solutions_with_claims_beside_the_measured(tmp_path):
    from tests.test_suite import forgebench

    problems, solutions = tmp_path / "problems" / "level1", tmp_path / "solutions"
    problems.mkdir(parents=True)
    solutions.mkdir()
    (problems / "1_ReLU.py").write_text(textwrap.dedent(RELU_PROBLEM))
    (problems / "2_Conv_ReLU.py").write_text(textwrap.dedent(CONV_TASK))
    (solutions / "1_ReLU.py").write_text(textwrap.dedent(RELU_SOLUTION))  # named like its problem
    # KernelBench's runs layout: level 1, problem 2; it keeps PyTorch's convolution (allowed here).
    (solutions / "level_1_problem_2_sample_0_kernel.py").write_text(textwrap.dedent(CONV_AND_OWN_RELU))
    (solutions / "9_Nothing.py").write_text(textwrap.dedent(ONLY_TORCH))
    (solutions / "claims.json").write_text(json.dumps({"1_ReLU": 3.5}))
    report = tmp_path / "report.md"
    done = forgebench(tmp_path, "regrade", str(solutions), "--problems", str(problems.parent), "--report", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 solutions regraded: 2 correct" in done.stdout, done.stdout
    assert "skipped 9_Nothing.py: no problem" in done.stdout
    rows = {r["solution"]: r for r in json.loads(report.with_suffix(".json").read_text())}
    assert rows["1_ReLU.py"]["claimed_speedup"] == 3.5 and rows["1_ReLU.py"]["speedup_vs_eager"] > 0
    assert rows["level_1_problem_2_sample_0_kernel.py"]["problem"] == "2_Conv_ReLU"
    assert "aten.convolution" in rows["level_1_problem_2_sample_0_kernel.py"]["torch_ops"]
    assert report.read_text().startswith("2 solutions regraded")


def test_aten_called_by_symbol_from_a_built_library_is_named(tmp_path, monkeypatch):
    # at::cpu:: and at::native:: calls reach neither the dispatcher nor the profiler: a library the
    # candidate built that calls them shows by its undefined symbols.
    import ctypes

    from harness import devices

    monkeypatch.setenv("FORGEBENCH_BUILD_CACHE", str(tmp_path))
    provider, user = tmp_path / "libprovider.so", tmp_path / "libuser.so"
    (tmp_path / "provider.cpp").write_text("namespace at { namespace cpu { int fake_mul(int x) { return 2 * x; } } }")
    (tmp_path / "user.cpp").write_text(
        "namespace at { namespace cpu { int fake_mul(int); } }\n"
        'extern "C" int twice(int x) { return at::cpu::fake_mul(x); }'
    )
    for source, library in ((tmp_path / "provider.cpp", provider), (tmp_path / "user.cpp", user)):
        subprocess.run(["g++", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    ctypes.CDLL(str(provider), mode=ctypes.RTLD_GLOBAL)
    assert ctypes.CDLL(str(user)).twice(21) == 42
    assert "at::cpu::fake_mul" in devices.load("cpu").library_symbols()


def test_a_forward_returning_a_tuple_is_read_as_its_tensors():
    from harness.evaluate import outputs

    first, second = torch.ones(2), torch.zeros(3)
    assert outputs.leaves((first, [second])) == [first, second]
    assert "Carrier" in outputs.leaves((first, first.as_subclass(type("Carrier", (torch.Tensor,), {}))))
