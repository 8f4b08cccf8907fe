"""Nsight Compute in the evaluator (harness/evaluate/ncu.py): ncu's report is read per kernel, the
worker under it is confined like any other, and the analyst sees the metrics or why there are none.
The real ncu runs in tests/gpu; here a stand-in with ncu's command line runs the real zygote and
worker under it and writes a report in ncu's CSV layout."""

import json
import os
import sys
import textwrap
from pathlib import Path

from harness.agents.analyst import ncu_table
from harness.evaluate import ncu
from harness.tasks import resolve_one

# ncu --csv --print-units base --log-file: its messages, then one row per kernel and metric.
HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)
KERNELS = {
    "0": ("fused_kernel", "(128, 1, 1)", "(16384, 1, 1)"),
    "1": ("triton_red_fused_mean_0", "(256, 1, 1)", "(512, 1, 1)"),
}
VALUES = [
    ("0", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "81.29"),
    ("0", "gpu__time_duration.sum", "ns", "34,620"),
    ("0", "launch__grid_size", "", "16384"),
    ("0", "launch__registers_per_thread", "register/thread", "32"),
    ("0", "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "87.5"),
    ("1", "gpu__time_duration.sum", "ns", "5,120"),
    ("1", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "12.4"),
]


def _row(kernel_id: str, metric: str, unit: str, value: str) -> str:
    name, block, grid = KERNELS[kernel_id]
    cells = [kernel_id, "4242", "python3.12", "127.0.0.1", name, "1", "7", block, grid, "0", "9.0"]
    return ",".join(f'"{c}"' for c in [*cells, "Command line profiler metrics", metric, unit, value])


REPORT = "\n".join(
    [
        "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
        '==PROF== Profiling "fused_kernel" - 0: 0%....50%....100% - 9 passes',
        "==PROF== Disconnected from process 4242",
        HEADER,
        *(_row(*v) for v in VALUES),
    ]
)


def test_the_report_is_read_per_kernel_longest_first():
    kernels = ncu.parse(REPORT)
    assert [k["kernel"] for k in kernels] == ["fused_kernel", "triton_red_fused_mean_0"]
    first = kernels[0]
    assert first["time_ns"] == 34620.0 and first["dram_pct"] == 81.29 and first["occupancy_pct"] == 87.5
    assert first["registers"] == 32.0 and first["grid"] == 16384.0
    table = "\n".join(ncu_table({"kernels": kernels}))
    assert "| `fused_kernel` | 34.6 | 81 |" in table and "| `triton_red_fused_mean_0` | 5.1 | 12 |" in table


def test_without_kernels_the_analyst_reads_why():
    assert ncu.failure("==ERROR== ERR_NVGPUCTRPERM - no permission\n") == "ERR_NVGPUCTRPERM - no permission"
    assert ncu_table({"error": "no ncu on this machine"}) == [
        "",
        "Nsight Compute: no metrics (no ncu on this machine).",
    ]
    assert ncu_table(None) == []  # a CPU's profile asks for none


def _stand_in(folder: Path, report: str) -> Path:
    """An executable with ncu's command line. It checks the options ForgeBench relies on, prints a
    message to the output it shares with the zygote, gives the program it runs a variable of its
    own (as ncu gives its injection library's), and once that program has exited cleanly writes
    `report`, with its uid for "<uid>", to --log-file (ncu writes its report when the profiled
    program ends)."""
    program = folder / f"ncu-{len(list(folder.iterdir()))}"
    program.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import os, subprocess, sys
            args = sys.argv[1:]
            assert args[args.index("--nvtx-include") + 1] == "forgebench/" and "--nvtx" in args, args
            assert args[args.index("--metrics") + 1] == {",".join(ncu.METRICS)!r}, args
            log = args[args.index("--log-file") + 1]
            command = args[args.index("--metrics") + 2:]
            print("==PROF== Connected to process 4242", flush=True)
            done = subprocess.run(command, env={{**os.environ, "NCU_STAND_IN_INJECTION": "1"}})
            if done.returncode == 0:
                open(log, "w").write({report!r}.replace("<uid>", str(os.getuid())))
            sys.exit(done.returncode)
            """
        )
    )
    program.chmod(0o755)
    return program


# A candidate that notes what its process can see: the tool's variable, a harness secret, a file
# outside its folder. Its forward is the reference's.
NOSY = """
import json, os
seen = {"tool": os.environ.get("NCU_STAND_IN_INJECTION"), "secret": os.environ.get("FORGEBENCH_TEST_SECRET")}
try:
    open(SECRET_FILE).read()
    seen["outside"] = "read"
except OSError as exc:
    seen["outside"] = type(exc).__name__
json.dump(seen, open("seen.json", "w"))
ModelNew = Model
"""


def test_a_candidate_is_profiled_by_a_confined_worker_under_the_tool(make_evaluator, tmp_path, monkeypatch):
    task = resolve_one("rmsnorm_qwen")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for candidates")
    source = task.reference_path.read_text() + f"\nSECRET_FILE = {str(secret)!r}\n" + NOSY
    evaluator = make_evaluator()
    monkeypatch.setenv("FORGEBENCH_NCU", str(_stand_in(tmp_path, REPORT)))
    monkeypatch.setenv("FORGEBENCH_TEST_SECRET", "sk-live-123")
    folder = evaluator.work_dir / "candidates" / task.id / "profiled-ncu"
    profile = evaluator._ncu_profile(task, source, folder)
    assert [k["kernel"] for k in profile["kernels"]] == ["fused_kernel", "triton_red_fused_mean_0"], profile
    assert '"verdict": "profiled"' in (folder / "result.json").read_text()  # the forward ran under the tool
    seen = json.loads((folder / "seen.json").read_text())
    assert seen["tool"] == "1"  # the tool's variables reach the worker (ncu's injection needs them)
    assert seen["secret"] is None and seen["outside"] != "read"  # nothing else does
    assert not folder.with_name("profiled-ncu-tool").exists()  # the raw report is not left for later workers


def test_a_failing_forward_a_refusing_ncu_and_no_ncu_each_leave_their_reason(make_evaluator, tmp_path, monkeypatch):
    task = resolve_one("rmsnorm_qwen")
    source = (
        task.reference_path.read_text()
        + "\nclass ModelNew(Model):\n    def forward(self, *a):\n        raise RuntimeError('boom')\n"
    )
    evaluator = make_evaluator()
    monkeypatch.setenv("FORGEBENCH_NCU", str(_stand_in(tmp_path, "==PROF== Disconnected from process 4242\n")))
    profile = evaluator._ncu_profile(task, source, evaluator.work_dir / "candidates" / task.id / "fails-ncu")
    assert "kernels" not in profile and profile["error"].startswith("the worker exited"), profile
    monkeypatch.setenv("FORGEBENCH_NCU", str(_stand_in(tmp_path, "==ERROR== ERR_NVGPUCTRPERM - no permission\n")))
    first = evaluator._ncu_profile(
        task, task.reference_path.read_text() + "\nModelNew = Model\n", evaluator.work_dir / "r1"
    )
    assert first == {"error": "ERR_NVGPUCTRPERM - no permission"}
    again = evaluator._ncu_profile(
        task, source, evaluator.work_dir / "r2"
    )  # not tried again: it would fail the same way
    assert again["error"].startswith("ERR_NVGPUCTRPERM") and "not tried again" in again["error"]
    assert not (evaluator.work_dir / "r2").exists()
    monkeypatch.setenv("FORGEBENCH_NCU", os.fspath(tmp_path / "no-such-ncu"))
    assert evaluator._ncu_profile(task, source, evaluator.work_dir / "x")["error"].startswith("no ncu on this machine")
