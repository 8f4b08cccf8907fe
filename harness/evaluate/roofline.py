"""The roofline: a device's measured copy bandwidth and matmul rate, and a kernel's share of it."""

from __future__ import annotations

import torch

from harness.devices import Device
from harness.evaluate import timing


def measure_ceilings(adapter: Device) -> dict[str, float]:
    """Large device-to-device copy (bytes read + written) and large matmul, timed once, at the sizes
    the device's adapter gives (a CPU run must stay within seconds on 2 cores)."""
    sizes, device = adapter.ceilings, adapter.torch_device()
    source = torch.randn(sizes.copy_bytes // 4, device=device)
    target = torch.empty_like(source)
    copy = timing.measure(lambda x: target.copy_(x), [[source]], adapter, budget_ms=200, warmup_ms=20)
    n, dtype = sizes.matmul_n, sizes.matmul_dtype
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    matmul = timing.measure(torch.mm, [[a, b]], adapter, budget_ms=300, warmup_ms=50)
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
