"""A decoder block's residual stream on the CPU (tests/integrate/test_multi_output.py): the
attention's output added to the residual, that sum normed by an RMSNorm written as torch ops (as
Qwen3.5 and Gemma write it), and the same sum read again by the residual add after the MLP. The
residual add and the norm are one chain with two outputs, the sum and the normed result, as
FlashInfer's fused_add_rmsnorm returns both. All float32."""

import torch
import torch.nn as nn

ROWS, HIDDEN = 64, 512


class RMSNorm(nn.Module):
    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(HIDDEN) * 0.1 + 1.0)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(HIDDEN, HIDDEN)
        self.norm = RMSNorm()
        self.mlp = nn.Linear(HIDDEN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = self.attn(x) + residual  # the residual sum: read by the norm, and by the stream below
        return h + self.mlp(self.norm(h))


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(ROWS, HIDDEN), torch.randn(ROWS, HIDDEN)


def build():
    torch.manual_seed(0)
    return Block(), inputs()


def captured_chain(out):
    """`forgebench capture` of this model into `out` on the CPU (every call group a task, however a
    loaded machine skews the timings), and the residual add + RMSNorm chain's task, the one with two
    outputs. In a process of its own, as a user runs it: in one probe on the CPU machine, the guard
    timed the chain at 8 ms a call in the process that had captured it, against 0.05 ms in a fresh one."""
    import subprocess
    import sys
    from pathlib import Path

    from harness.tasks import discover

    args = ["--device", "cpu", "--out", str(out), "--budget-ms", "10", "--min-share", "0.0001", "--coverage", "1"]
    command = [sys.executable, "-m", "forgebench.cli", "capture", "--model", f"{__name__}:build", *args]
    run = subprocess.run(command, cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    (task,) = [t for t in discover(out) if "multi-output" in t.tags]
    return task
