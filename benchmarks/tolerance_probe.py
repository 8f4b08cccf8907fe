"""The fp64-derived bound (harness/evaluate/tolerance.py) on a fp32 mat-vec with a long reduction:
eager, a blocked sum (an honest reordering) and the same sum over inputs read as bf16, each against
eager's output with the fixed bound and against the fp64 reference with the derived one.

    python benchmarks/tolerance_probe.py [--device cuda] [--k 131072] [--m 256]
"""

from __future__ import annotations

import argparse
import json

import torch

from harness.evaluate import tolerance
from harness.evaluate.checks import compare


class MatVec(torch.nn.Module):
    def forward(self, a, x):
        return torch.matmul(a, x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--k", type=int, default=2**17)
    parser.add_argument("--m", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    a = torch.randn(args.m, args.k, device=args.device)
    x = torch.randn(args.k, 1, device=args.device)
    eager = [MatVec()(a, x)]
    expected = tolerance.derive(MatVec(), [a, x], eager, None)
    exact = a.double() @ x.double()
    blocked = (a.view(args.m, -1, 1024) * x.view(-1, 1024)).sum(-1, dtype=torch.float32).sum(-1).view(args.m, 1)
    bf16 = (a.bfloat16().float().view(args.m, -1, 1024) * x.bfloat16().float().view(-1, 1024)).sum(-1).sum(-1)
    rows = {}
    for name, got in (("eager", eager[0]), ("blocked", blocked), ("bf16_inputs", bf16.view(args.m, 1))):
        fixed = compare(eager, [got])
        derived = compare(expected.outputs, [got], None, expected.bounds)
        rows[name] = {
            "max_error_vs_fp64": float((got.double() - exact).abs().max()),
            "fixed_bound_vs_eager": "pass" if fixed is None else fixed.reason,
            "fp64_bound": "pass" if derived is None else derived.reason,
        }
    print(json.dumps({"device": args.device, "m": args.m, "k": args.k, "basis": expected.basis, **rows}, indent=1))


if __name__ == "__main__":
    main()
