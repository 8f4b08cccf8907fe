"""The roofline: a device's measured copy bandwidth and matmul rate, and a kernel's share of it."""

from __future__ import annotations

import torch

from harness.evaluate import timing

# Sizes that fill each kind of device; a CPU run must stay within seconds on 2 cores.
_COPY_BYTES = {"cuda": 2**30, "cpu": 2**28}
_MATMUL_N = {"cuda": 8192, "cpu": 1024}
_MATMUL_DTYPE = {"cuda": torch.bfloat16, "cpu": torch.float32}


def measure_ceilings(device: torch.device) -> dict[str, float]:
    """Large device-to-device copy (bytes read + written) and large matmul, timed once."""
    kind = device.type
    source = torch.randn(_COPY_BYTES[kind] // 4, device=device)
    target = torch.empty_like(source)
    copy = timing.measure(lambda x: target.copy_(x), [[source]], device, budget_ms=200, warmup_ms=20)
    n, dtype = _MATMUL_N[kind], _MATMUL_DTYPE[kind]
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    matmul = timing.measure(torch.mm, [[a, b]], device, budget_ms=300, warmup_ms=50)
    # The fast end of the samples: a ceiling is what the device can do, and other load on the
    # machine (CI, a parallel test) only ever makes calls slower.
    return {
        "copy_gbps": 2 * source.numel() * 4 / copy.p20_ms / 1e6,
        "matmul_tflops": 2 * n**3 / matmul.p20_ms / 1e9,
        "matmul_dtype": str(dtype).removeprefix("torch."),
    }


def floor_ms(bytes_moved: float | None, flops: float | None, ceilings: dict[str, float]) -> float | None:
    """The least time the task can take on this device: bytes over bandwidth or FLOPs over rate."""
    if not bytes_moved and not flops:
        return None
    memory = (bytes_moved or 0) / (ceilings["copy_gbps"] * 1e9) * 1e3
    compute = (flops or 0) / (ceilings["matmul_tflops"] * 1e12) * 1e3
    return max(memory, compute)
