"""Host time against measured time: for each task, eager, torch.compile and the offline model's default
Triton candidate, each timed three ways on the GPU: host microseconds per call (calls issued without
waiting), triton.testing.do_bench, and the harness's own timer. A measured time near the host time
and far above the kernel's means the GPU waited for the host.

From the repository root on the GPU machine (torch, triton; hydra for the platform config):

    python3 benchmarks/launch_overhead.py --out overhead.json [task ids...]
    python3 benchmarks/launch_overhead.py --out old.json --templates OLD_DIR  # another fused.py.tmpl

Each candidate is also checked against the reference on fresh copies of the inputs and on
inputs moved to an address that is not 16-byte aligned, so a launch path that keeps compiled
kernels per layout is checked for the layouts it did not compile for.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

import torch
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.config import compose, instantiate  # noqa: E402
from harness.evaluate import timing  # noqa: E402
from harness.llm.offline import fused  # noqa: E402
from harness.llm.offline.prompt import parse_task  # noqa: E402
from harness.llm.offline.writers import gpu_plan, render  # noqa: E402
from harness.prompts import build_messages  # noqa: E402
from harness.tasks import load_reference_module, select  # noqa: E402

DEFAULT_TASKS = [
    "resnet50_fused3_native_batch_norm_relu_32x256x56x56_67bb08",
    "resnet50_native_batch_norm_32x256x56x56_e9008c",
    "resnet50_fused2_native_batch_norm_relu_32x64x112x112_90c7c7",
    "sd35_fused8_to_copy_mul_2x24x4096x64_5b18c8",
    "qwen35_copy_8x32x64x128_d3241c",
    "gemma4_mul_8x2048x5376_ccdb28",
]


def host_us(fn, calls: int = 300) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    per_call = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return per_call


def three_ways(fn, inputs: list) -> dict:
    copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    harness = timing.measure(lambda *xs: fn(*xs), [inputs, copies], torch.device("cuda"), budget_ms=300)
    return {
        "host_us": host_us(lambda: fn(*inputs)),
        "do_bench_ms": do_bench(lambda: fn(*inputs), return_mode="median"),
        "harness_ms": harness.median_ms,
    }


def unaligned(x):
    """The same values at an address one element past a 16-byte boundary (contiguous inputs only)."""
    if not isinstance(x, torch.Tensor) or x.numel() < 2 or not x.is_contiguous():
        return x
    return torch.empty(x.numel() + 1, dtype=x.dtype, device=x.device)[1:].copy_(x.reshape(-1)).view(x.shape)


def candidate(task, platform, templates: Path | None):
    """The offline model's default Triton candidate for the task, loaded as a module."""
    prompt = build_messages(task, platform, "new", [])[-1]["content"]
    parsed = parse_task(prompt)
    plan = gpu_plan(parsed)
    if isinstance(plan, str):
        raise ValueError(plan)
    if templates is not None:
        fused.TEMPLATES_DIR = templates
    source = render(plan.family, plan.family.default, parsed, plan)
    path = Path(f"/tmp/launch_overhead_{task.id}.py")  # Triton reads the kernel's source from a file
    path.write_text(source)
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def measure_task(task_id: str, platform, templates: Path | None) -> dict:
    task = select(task_id)[0]
    reference = load_reference_module(task.reference_path, f"ref_{task.id}")
    torch.manual_seed(0)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in reference.get_inputs()]
    model = reference.Model(*reference.get_init_inputs()).cuda()
    record = {}
    with torch.no_grad():
        expected = model(*inputs)
        compiled = torch.compile(model)
        compiled(*inputs)
        record["eager"] = three_ways(model, inputs)
        record["compile"] = three_ways(compiled, inputs)
        new = candidate(task, platform, templates).ModelNew(*reference.get_init_inputs()).cuda()
        checks = []
        for trial in [inputs, [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]]:
            checks.append(torch.allclose(new(*trial).float(), expected.float(), atol=2e-2, rtol=2e-2))
        shifted = [unaligned(x) for x in inputs]
        checks.append(torch.allclose(new(*shifted).float(), model(*shifted).float(), atol=2e-2, rtol=2e-2))
        record["candidate"] = {"matches_reference": [bool(c) for c in checks], **three_ways(new, inputs)}
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="*", default=DEFAULT_TASKS)
    parser.add_argument("--out", required=True, help="JSON file for the records")
    parser.add_argument("--templates", type=Path, help="a folder holding another fused.py.tmpl to render with")
    args = parser.parse_args()
    platform = instantiate(compose(platform="triton", overrides=[]).platform, "platform")
    records = {}
    for task_id in args.tasks:
        try:
            records[task_id] = measure_task(task_id, platform, args.templates)
        except Exception as exc:  # one task's failure is recorded; the others still run
            records[task_id] = {"error": f"{type(exc).__name__}: {exc}"}
        print(task_id, json.dumps(records[task_id]), flush=True)
        Path(args.out).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
