"""What one `torch.utils.cpp_extension.load_inline` CUDA build costs, step by step, and what settings
from outside the candidate change it (docs/regrade.md: regrading sets of load_inline solutions).

    python3 -m benchmarks.load_inline_build_cost [--out FILE.json]

1. load_inline of a trivial ReLU kernel, `#include <torch/extension.h>` in the .cu as KernelBench
   solutions write it, in a fresh folder: wall seconds, and each ninja step's from `.ninja_log`.
2. Each compile step again by its own command from that build.ninja, with wall and CPU seconds: the .cu
   as torch built it (TORCH_CUDA_ARCH_LIST as set, else the GPUs' `X.Y+PTX`, torch's default), with
   nvcc's phase times (`-time`); with one `-gencode` (SASS only, as TORCH_CUDA_ARCH_LIST=X.Y gives);
   main.cpp as built, and with the harness's precompiled torch/extension.h offered through CPATH as
   a candidate's worker gets it (harness/evaluate/precompiled.py); and the .cu with no torch header
   (the kernel and a launcher taking pointers, the binding in main.cpp: the candidate's choice).

On a torch without CUDA (a CPU wheel) the link fails (no libtorch_cuda) and the compile steps are
still timed: nvcc is taken from CUDA_HOME, else from PATH, and TORCH_CUDA_ARCH_LIST defaults to 9.0+PTX
(what torch picks for an H200).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  long n = x.numel();
  relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
CPP_SOURCE = "torch::Tensor relu(torch::Tensor x);"
# The same kernel with no torch header in the .cu: the launcher takes pointers, main.cpp binds it.
SLIM_CUDA_SOURCE = r"""
#include <cuda_runtime.h>
__global__ void relu_kernel(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
void relu_launch(const float* x, float* y, long n) { relu_kernel<<<(n + 255) / 256, 256>>>(x, y, n); }
"""


def _cuda_home() -> str:
    import torch.utils.cpp_extension as cpp_extension

    if cpp_extension.CUDA_HOME is None:  # a CPU wheel: compile anyway with the nvcc found here
        nvcc = shutil.which("nvcc")
        home = os.environ.get("CUDA_HOME") or ("/usr/local/cuda" if nvcc else None)
        if home is None:
            raise SystemExit("no nvcc: set CUDA_HOME or put nvcc on PATH")
        cpp_extension.CUDA_HOME = home
    return cpp_extension.CUDA_HOME


def _load_inline(folder: Path) -> dict:
    from torch.utils.cpp_extension import load_inline

    started = time.perf_counter()
    try:
        load_inline(
            "relu_build_cost", CPP_SOURCE, cuda_sources=CUDA_SOURCE, functions=["relu"], build_directory=str(folder)
        )
        outcome = "built"
    except Exception as exc:  # a CPU wheel cannot link: the compile steps were still done
        outcome = f"failed: {str(exc).splitlines()[0][:200]}"
    steps = {}
    log = folder / ".ninja_log"
    for line in log.read_text().splitlines()[1:] if log.is_file() else []:
        start, end, _, target, _ = line.split("\t")
        steps[target] = round((int(end) - int(start)) / 1000, 2)
    return {"wall_s": round(time.perf_counter() - started, 2), "outcome": outcome, "ninja_steps_s": steps}


def _ninja_vars(folder: Path) -> dict[str, str]:
    found = {}
    for line in (folder / "build.ninja").read_text().splitlines():
        match = re.fullmatch(r"(\w+) = (.*)", line)
        if match:
            found[match[1]] = match[2]
    return found


def _timed(command: str, cwd: Path, env: dict[str, str] | None = None) -> dict:
    """Wall and CPU seconds (the shell's and its children's user + system, from wait4) of one command."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        child = subprocess.Popen(
            command, shell=True, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()
    row = {"wall_s": round(time.perf_counter() - started, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2)}
    if child.returncode != 0:
        row["error"] = output[-400:]
    return row


def _phases(csv: Path) -> dict[str, float]:
    """nvcc -time's phases, in seconds."""
    phases: dict[str, float] = {}
    for line in csv.read_text().splitlines()[1:] if csv.is_file() else []:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 8 and cells[7] == "ms":
            phases[cells[1]] = round(phases.get(cells[1], 0.0) + float(cells[6]) / 1000, 2)
    return phases


def _variants(folder: Path, v: dict[str, str]) -> dict:
    """Each compile step by its own command, as build.ninja has it and changed one way at a time, all at
    once (each is one process on its own core: the steps took 200 s one after another on the H200)."""
    nvcc, post = f"{v['nvcc']} {v['cuda_cflags']}", v["cuda_post_cflags"]
    # SASS only: the PTX copy (code=compute_XY) dropped, as TORCH_CUDA_ARCH_LIST=X.Y without +PTX does.
    one_arch = " ".join(flag for flag in v["cuda_cflags"].split(" ") if "code=compute_" not in flag)
    (folder / "slim.cu").write_text(SLIM_CUDA_SOURCE)
    cxx = f"{v['cxx']} {v['cflags']}"
    commands = {
        "cu_as_built": (f"{nvcc} -time as_built.csv -c cuda.cu -o a.o {post}", None),
        "cu_one_gencode": (f"{v['nvcc']} {one_arch} -time one.csv -c cuda.cu -o b.o {post}", None),
        "cu_without_torch_header": (f"{nvcc} -c slim.cu -o c.o {post}", None),
        "cpp_as_built": (f"{cxx} -c main.cpp -o d.o {v['post_cflags']}", None),
    }
    # The harness's precompiled torch/extension.h (harness/evaluate/precompiled.py), made for a C++
    # extension's main.cpp and offered through CPATH as a candidate's worker gets it: whether GCC
    # finds it valid for a CUDA extension's main.cpp too (-Winvalid-pch says why not).
    from harness.evaluate.precompiled import PrecompiledHeader

    started = time.perf_counter()
    header = PrecompiledHeader(True)
    pch = header.folder()
    rows = {"pch_ready": {"wall_s": round(time.perf_counter() - started, 2), "failed": header.failed}}
    if pch is not None:
        command = f"{v['cxx']} -Winvalid-pch {v['cflags']} -c main.cpp -o e.o {v['post_cflags']}"
        commands["cpp_with_pch"] = (command, {"CPATH": str(pch)})
    with ThreadPoolExecutor(len(commands)) as pool:
        futures = {name: pool.submit(_timed, command, folder, env) for name, (command, env) in commands.items()}
        rows.update({name: future.result() for name, future in futures.items()})
    rows["cu_as_built"]["phases_s"] = _phases(folder / "as_built.csv")
    rows["cu_one_gencode"]["phases_s"] = _phases(folder / "one.csv")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args()
    import torch

    _cuda_home()
    if not os.environ.get("TORCH_CUDA_ARCH_LIST") and not torch.cuda.is_available():
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0+PTX"
    figures: dict = {
        "torch": torch.__version__,
        "nvcc": subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1],
        "cores": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", "(the GPUs')"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        figures["load_inline"] = _load_inline(folder)
        print(json.dumps({"load_inline": figures["load_inline"]}), flush=True)
        figures["steps"] = _variants(folder, _ninja_vars(folder))
    for name, row in figures["steps"].items():
        print(json.dumps({name: row}), flush=True)
    figures["load_average_at_end"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
