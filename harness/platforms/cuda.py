"""Platform `cuda`: CUDA C++ kernels compiled by NVRTC in well under a second, PTX cached by content.

`torch.utils.cpp_extension.load_inline` took 24.9 s for a trivial kernel on the H200 (it
compiles torch's headers with nvcc); NVRTC compiles a raw `extern "C" __global__` source in
about 0.05 s once started, and a source seen before loads its PTX from the cache.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import torch

from harness.platforms.base import Platform
from harness.platforms.build_cache import CompileError, cached_build, content_key


def compile_cuda(source: str, kernel_name: str, options: tuple[str, ...] = ("--use_fast_math",)):
    """Compile one `extern "C" __global__` kernel; returns a callable
    `kernel(grid=(x, y, z), block=(x, y, z), args=[tensors and scalars], shared_mem=0)`."""
    from torch.cuda._utils import _cuda_load_module, _nvrtc_compile

    major, minor = torch.cuda.get_device_capability()
    capability = f"{major}{minor}"
    key = content_key(source, kernel_name, capability, torch.version.cuda or "", *options)

    def build(tmp):
        try:
            ptx, mangled = _nvrtc_compile(source, kernel_name, capability, None, list(options))
        except RuntimeError as exc:
            raise CompileError(str(exc)) from exc
        # NVRTC may hand back a binary (cubin) rather than PTX text: keep the bytes as they are.
        image = ptx if isinstance(ptx, bytes) else ptx.encode()
        path = tmp / "kernel.json"
        path.write_text(json.dumps({"image": base64.b64encode(image).decode(), "name": mangled}))
        return path

    record = json.loads(cached_build(key, "kernel.json", build).artifact.read_text())
    module = _cuda_load_module(base64.b64decode(record["image"]), [record["name"]])
    return module[record["name"]] if isinstance(module, dict) else getattr(module, record["name"])


class CudaPlatform(Platform):
    def cache_dirs(self, cache_dir: Path) -> dict[str, Path]:
        # torch.compile baselines build Triton kernels too, whatever the platform.
        return {
            **super().cache_dirs(cache_dir),
            "TRITON_CACHE_DIR": cache_dir / "triton",
            "TORCHINDUCTOR_CACHE_DIR": cache_dir / "inductor",
            # FlashInfer's JIT-built kernels (its baseline): built once, then loaded from here.
            "FLASHINFER_WORKSPACE_BASE": cache_dir / "flashinfer",
        }

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return f"platform '{self.name}' needs an NVIDIA GPU and torch sees none here; use --platform cpu."
        return None
