"""PyTorch's own ops in a candidate under evaluate.torch_ops: named wherever they are called from
(the dispatcher, or a built library's symbols), kept where allowed, and a candidate of PyTorch alone
rejected; work on another library's thread pool is not escaped work."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from harness.tasks import resolve_one


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


@pytest.mark.slow
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
