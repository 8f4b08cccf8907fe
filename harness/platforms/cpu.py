"""Platform `cpu`: C++ kernels (OpenMP allowed), built by g++ straight to a shared library.

`torch.utils.cpp_extension.load_inline` costs 23-26 s per build on a 2-core machine because
it compiles torch's headers; a plain `extern "C"` library built with g++ and loaded by ctypes
takes about a second, and a source seen before loads from the content-addressed cache.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shlex
import subprocess
from pathlib import Path

import torch

from harness.platforms.build_cache import CompileError, cached_build, content_key

CXX_FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17")


@functools.cache
def _compiler_identity(cxx: str) -> str:
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise CompileError(f"no C++ compiler at '{cxx}' ({exc}); install g++ or set CXX") from exc


def compile_cpp(source: str, extra_flags: tuple[str, ...] = ()) -> ctypes.CDLL:
    """Build C++ source with extern "C" functions into a library and load it with ctypes."""
    cxx = os.environ.get("CXX", "g++")
    flags = CXX_FLAGS + tuple(extra_flags)
    key = content_key(source, cxx, _compiler_identity(cxx), *flags)

    def build(tmp: Path) -> Path:
        src, lib = tmp / "kernel.cpp", tmp / "kernel.so"
        src.write_text(source)
        proc = subprocess.run([cxx, *flags, str(src), "-o", str(lib)], capture_output=True, text=True)
        if proc.returncode != 0:
            command = shlex.join([cxx, *flags, "kernel.cpp"])
            raise CompileError(f"{command} failed:\n{proc.stderr.replace(str(tmp) + '/', '')}")
        return lib

    return ctypes.CDLL(str(cached_build(key, "kernel.so", build).artifact))


def ptr(tensor: torch.Tensor) -> ctypes.c_void_p:
    """A tensor's data pointer for a ctypes call; the tensor must be contiguous."""
    if not tensor.is_contiguous():
        raise ValueError("ptr() needs a contiguous tensor; call .contiguous() first")
    return ctypes.c_void_p(tensor.data_ptr())
