"""How fast `forgebench regrade` grades a set of `load_inline` CUDA solutions (docs/regrade.md): N
distinct KernelBench level-1 solutions written in KernelBench's runs layout, each a CUDA kernel built
by `torch.utils.cpp_extension.load_inline` (a constant varies, so every source is new and truly
builds), graded with --jobs = the cores, then resumed. One summary line per phase:

- `first`: the whole set from a cold build cache: wall seconds, seconds a solution, when the first
  timing started and the last build ended (builds overlap timing), verdicts;
- `resume`: the journal's last --resume rows dropped (a regrade stopped there), the same command:
  those solutions are built again from the cache (no shared object is rewritten) and timed;
- `again`: the same command once more: nothing is graded, nothing built.

With `--stop-after S` the first phase is killed (SIGKILL, its whole process group: a machine's limit)
S seconds in, and nothing follows; `--go-on` over the same `--work` then runs the command once more,
as the next device call would (the machine keeps an ignored folder of the repository between warm
calls), and says how many shared objects it rewrote. Each phase also prints the median seconds of
the evaluator's phases over the solutions it timed (the journal's rows).

From the repository root, with hydra and mlflow importable (benchmarks/gpu_wheels.sh on the H200):

    PYTHONPATH=/tmp/site:$PWD python3 -m benchmarks.regrade_speed --n 100
        [--problems KERNELBENCH] [--numbers 12,88] [--jobs CORES] [--resume 10] [--work DIR]
        [--stop-after SECONDS | --go-on] [--platform cuda] [--override KEY=VALUE ...]

The default problems, 12 (diag(A) @ B, 67 MB of inputs) and 88 (minGPT's GELU, 268 MB), keep one
timing to seconds; the elementwise problems 19-32 have 6.4 GB inputs, which take several times as
long to time (docs/results.md: a 6 GB task). The baselines are eager only unless an override names
platform.baselines (torch.compile's max-autotune takes minutes a problem). On a machine without a
GPU, `--platform cpu` still writes the set and drives the command: every build fails there (this
torch cannot build CUDA), and the phases show the bookkeeping.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SET_NAME = "regrade-speed"

# By problem number: the inputs forward takes, and each output element's value in double from `v`,
# the last input's element `i` (its shape is the output's; `cols` is its last dimension).
KERNELS = {
    "12": ("A, B", "(double)A[i / cols] * v"),
    "88": ("x", "0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))"),
    "19": ("x", "v > 0.0 ? v : 0.0"),
    "20": ("x", "v > 0.0 ? v : 0.01 * v"),
    "21": ("x", "1.0 / (1.0 + exp(-v))"),
    "22": ("x", "tanh(v)"),
    "25": ("x", "v / (1.0 + exp(-v))"),
    "28": ("x", "fmin(fmax(v / 6.0 + 0.5, 0.0), 1.0)"),
    "30": ("x", "v / (1.0 + fabs(v))"),
    "32": ("x", "fmin(fmax(v, -1.0), 1.0)"),
}

SOLUTION = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void solution_kernel({pointers}, float* __restrict__ out, long n, long cols) {{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {{
        double v = (double){last}[i];
        out[i] = (float)({expression});
    }}
}}

torch::Tensor solution_cuda({tensors}) {{
    auto out = torch::empty_like({last});
    long n = {last}.numel();
    const int threads = {threads};
    long blocks = (n + threads - 1) / threads;
    if (blocks > {max_blocks}) blocks = {max_blocks};
    solution_kernel<<<blocks, threads>>>({data}, out.data_ptr<float>(), n, {last}.size(-1));
    return out;
}}
"""

cpp_source = "torch::Tensor solution_cuda({tensors});"

solution = load_inline(
    name="{name}",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["solution_cuda"],
    verbose=False,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, {inputs}):
        return solution.solution_cuda({contiguous})
'''


def solution_source(number: str, sample: int) -> str:
    """Sample `sample`'s solution to problem `number`: its block size and grid cap vary with it."""
    inputs, expression = KERNELS[number]
    names = [name.strip() for name in inputs.split(",")]
    return SOLUTION.format(
        pointers=", ".join(f"const float* __restrict__ {n}" for n in names),
        last=names[-1],
        expression=expression,
        tensors=", ".join(f"torch::Tensor {n}" for n in names),
        threads=(128, 256, 512, 1024)[sample % 4],
        max_blocks=2048 + sample,
        data=", ".join(f"{n}.data_ptr<float>()" for n in names),
        name=f"regrade_speed_{number}_{sample}",
        inputs=", ".join(names),
        contiguous=", ".join(f"{n}.contiguous()" for n in names),
    )


def write_set(work: Path, problems: Path, numbers: list[str], n: int) -> Path:
    """N solutions in KernelBench's runs layout (WORK/regrade-speed/), the problems they answer copied
    beside them (WORK/problems/level1/): sample i answers numbers[i % len(numbers)]."""
    level = work / "problems" / "level1"
    level.mkdir(parents=True, exist_ok=True)
    for number in numbers:
        found = sorted((problems / "level1").glob(f"{number}_*.py"))
        if not found:
            raise SystemExit(f"no level-1 problem {number} under {problems}; pass --problems KernelBench's folder")
        shutil.copyfile(found[0], level / found[0].name)
    folder = work / SET_NAME
    folder.mkdir(parents=True, exist_ok=True)
    for sample in range(n):
        number = numbers[sample % len(numbers)]
        (folder / f"level_1_problem_{number}_sample_{sample}_kernel.py").write_text(solution_source(number, sample))
    return folder


def shared_objects(work: Path) -> dict[str, float]:
    """Every candidate's built extension in the run's build caches (one per source), by path, with
    its modification time."""
    return {str(p): p.stat().st_mtime for p in (work / ".forgebench" / "cache" / "sources").rglob("*.so")}


def regrade(work: Path, folder: Path, args, phase: str, stop_after: float | None = None) -> dict:
    """The command run once, its lines echoed with the seconds since it began; what they show. With
    `stop_after`, its process group is killed that many seconds in, as a machine's limit would."""
    overrides = list(args.override)
    if not any(o.startswith("platform.baselines") for o in overrides):
        overrides.insert(0, "platform.baselines=[eager]")
    command = [sys.executable, "-m", "forgebench.cli", "regrade", str(folder), "--problems", str(work / "problems")]
    command += ["--platform", args.platform, "--jobs", str(args.jobs)]
    command += [arg for o in overrides for arg in ("--override", o)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)])),
        "FORGEBENCH_CACHE": str(work / ".forgebench" / "cache"),  # this run's own: cold at first
    }
    seen = {"builds": 0, "not_built": 0, "timings": 0, "graded": 0, "first_timing_s": None, "last_build_s": None}
    started = time.perf_counter()
    with subprocess.Popen(
        command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        stopper = threading.Timer(stop_after or 0.0, lambda: os.killpg(proc.pid, signal.SIGKILL))
        stopper.daemon = True
        if stop_after is not None:
            stopper.start()
        for line in proc.stdout:
            at = time.perf_counter() - started
            print(f"[{phase} {at:6.1f}s] {line}", end="", flush=True)
            _note(seen, line, at)
        stopper.cancel()  # ended before its limit: nothing left to kill
    seen["wall_s"] = time.perf_counter() - started
    seen["returncode"] = proc.returncode
    return seen


def _note(seen: dict, line: str, at: float) -> None:
    if " builds): " in line:
        seen["builds"] += 1
        seen["not_built"] += " builds): not built" in line
        seen["last_build_s"] = at
    elif re.search(r"\(\d+/\d+\): ", line):
        # A solution's verdict: a phase stopped by its limit is paced by these, not by its set's size.
        seen["graded"] += 1
    elif line.startswith("timing "):
        seen["timings"] += 1
        seen["first_timing_s"] = seen["first_timing_s"] or at
    elif (graded := re.search(r"(\d+) graded before, (\d+) to grade", line)) is not None:
        seen["to_grade"] = int(graded[2])
    elif (regraded := re.match(r"(\d+) solutions regraded: ([^;]+)", line)) is not None:
        seen["verdicts"] = regraded[2].strip()


def summary(phase: str, seen: dict, extra: str = "") -> str:
    to_grade = seen.get("to_grade", 0)
    graded = seen["graded"] + seen["not_built"]  # a failed build's verdict is given at its build
    per = f"{graded} graded, {seen['wall_s'] / graded:.2f} s each" if graded else "none graded"
    first, last = seen["first_timing_s"], seen["last_build_s"]
    overlap = f"first timing at {first:.1f} s, last build ended at {last:.1f} s" if first and last else ""
    parts = [
        f"{to_grade} to grade",
        f"wall {seen['wall_s']:.1f} s",
        per,
        f"builds {seen['builds']} ({seen['not_built']} failed)",
        f"timings {seen['timings']}",
        overlap,
        f"report: {seen.get('verdicts', '-')}",
        extra,
        f"exit {seen['returncode']}",
    ]
    return f"== {phase}: " + "; ".join(p for p in parts if p)


def journal(work: Path) -> Path:
    (path,) = (work / "runs" / "regrade").glob(f"{SET_NAME}-*/graded.jsonl")
    return path


def phase_medians(work: Path, skip: int) -> str:
    """The median seconds of each evaluator phase over the journal's rows after the first `skip`
    (those a phase graded), for the timed solutions: where a solution's timing goes."""
    rows = [json.loads(line) for line in journal(work).read_text().splitlines()[skip:] if line.strip()]
    timed = [r.get("phases", {}) for r in rows if r.get("phases", {}).get("timing_s")]
    if not timed:
        return "phases: none timed"
    names = sorted({k for p in timed for k in p}, key=lambda k: -statistics.median(p.get(k, 0.0) for p in timed))
    shown = ", ".join(f"{k} {statistics.median(p.get(k, 0.0) for p in timed):.3g}" for k in names)
    return f"phases of {len(timed)} timed (median s): {shown}"


def journal_rows(work: Path) -> int:
    try:
        return len(journal(work).read_text().splitlines())
    except ValueError:  # no journal yet
        return 0


def rebuilt(before: dict[str, float], after: dict[str, float]) -> int:
    """Shared objects of `before` written again (a build that a resumed regrade did not reuse)."""
    return sum(1 for path, mtime in after.items() if path in before and before[path] != mtime)


def drop_journal_tail(work: Path, rows: int) -> int:
    """The last `rows` rows of the regrade's journal removed, as if it had stopped before them."""
    path = journal(work)
    kept = path.read_text().splitlines()
    dropped = min(rows, len(kept))
    path.write_text("".join(line + "\n" for line in kept[: len(kept) - dropped]))
    return dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="solutions in the set (default 100)")
    shared = Path(os.environ.get("FORGEBENCH_SHARED", ROOT.parent / "shared"))
    parser.add_argument("--problems", type=Path, default=shared / "data" / "kernelbench", help="KernelBench's levels")
    parser.add_argument("--numbers", default="12,88", help=f"level-1 problems to answer, of {','.join(KERNELS)}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="builds at once (default: the cores)")
    parser.add_argument("--resume", type=int, default=10, help="journal rows dropped before the resume phase")
    parser.add_argument("--work", type=Path, default=None, help="a new folder for the run (default: under /tmp)")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--stop-after", type=float, default=None, metavar="SECONDS", help="kill the first phase then")
    stop.add_argument("--go-on", action="store_true", help="run once more over --work's set (the next call)")
    parser.add_argument("--platform", default="cuda")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    numbers = [n.strip() for n in args.numbers.split(",")]
    unknown = [n for n in numbers if n not in KERNELS]
    if unknown:
        raise SystemExit(f"--numbers {','.join(unknown)}: no kernel written for them; choose of {','.join(KERNELS)}")
    work = (args.work or Path("/tmp") / f"regrade_speed-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    if args.go_on:
        go_on(work, args)
        return
    if work.exists() and any(work.iterdir()):
        raise SystemExit(f"--work {work} is not empty: the first phase needs a cold build cache")
    folder = write_set(work, args.problems.resolve(), numbers, args.n)
    print(
        f"== set: {args.n} solutions to level-1 problems {','.join(numbers)} in {folder}; "
        f"{os.cpu_count()} cores, --jobs {args.jobs}, platform {args.platform}, {_device()}",
        flush=True,
    )
    first = regrade(work, folder, args, "first", args.stop_after)
    lines = [summary("first", first, phase_medians(work, 0) if journal_rows(work) else "")]
    if args.stop_after is not None:
        ended = f"stopped {args.stop_after:.0f} s in" if first["returncode"] == -signal.SIGKILL else "ended by itself"
        print(f"{lines[0]}\n== {ended}; {journal_rows(work)} graded", flush=True)
        return
    if first["returncode"] != 0:
        raise SystemExit(f"{lines[0]}\nthe first regrade failed (its lines above say why); no resume measured")
    before = shared_objects(work)
    dropped = drop_journal_tail(work, args.resume)
    resumed = regrade(work, folder, args, "resume")
    after = shared_objects(work)
    rewritten = rebuilt(before, after) + sum(1 for path in after if path not in before)
    lines.append(
        summary("resume", resumed, f"{dropped} journal rows dropped, {rewritten} of {len(after)} .so rewritten")
    )
    lines.append(summary("again", regrade(work, folder, args, "again")))
    print("\n".join(lines), flush=True)
    print(json.dumps({"work": str(work), "n": args.n, "jobs": args.jobs, "numbers": numbers}))


def go_on(work: Path, args) -> None:
    """The command once more over the set in `work`, as the call after a stopped one runs it."""
    folder = work / SET_NAME
    if not folder.is_dir():
        raise SystemExit(f"--go-on: no set in {work}; run once with --stop-after and the same --work first")
    before, rows = shared_objects(work), journal_rows(work)
    print(f"== go on: {rows} graded before, {len(before)} shared objects built; {_device()}", flush=True)
    seen = regrade(work, folder, args, "go-on")
    after = shared_objects(work)
    new = sum(1 for path in after if path not in before)
    extra = f"{rebuilt(before, after)} of {len(before)} built before rebuilt, {new} built now"
    extra += f"; {phase_medians(work, rows)}"
    print(summary("go-on", seen, extra), flush=True)


def _device() -> str:
    try:
        import torch
    except ImportError:
        return "no torch"
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"torch {torch.__version__}, {name}"


if __name__ == "__main__":
    main()
