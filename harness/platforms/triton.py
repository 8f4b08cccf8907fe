"""Platform `triton`: kernels written with `@triton.jit`; Triton's own cache is kept per machine."""

from __future__ import annotations

from harness.platforms.cuda import CudaPlatform


class TritonPlatform(CudaPlatform):
    def unavailable_reason(self) -> str | None:
        try:
            import triton  # noqa: F401
        except ImportError:
            return "platform 'triton' needs the triton package; install it beside torch (pip install triton)."
        return super().unavailable_reason()
