"""Nsight Compute metrics of a candidate's kernels, for the analyst: where the device's `ncu`
reads the hardware counters (the H200 on Firecracker does; on gVisor it cannot), a correct
candidate's forward runs once more in a sandboxed worker under ncu, and each of its kernels gets
its DRAM and SM throughput, achieved occupancy, L2 hit rate and registers.

Only the kernels inside the worker's NVTX range are profiled (NVTX_RANGE), not the warm-up calls
or the drawing of inputs. ncu replays each kernel once per pass over the counters, restoring the
memory it writes, so the numbers are one call's and the clocks are left as they run
(--clock-control none, as the timing module leaves them).
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

NVTX_RANGE = "forgebench"
# ncu metric -> the name the analyst reads. Percentages are of the device's sustained peak.
METRICS = {
    "gpu__time_duration.sum": "time_ns",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "launch__registers_per_thread": "registers",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
}
_MAX_KERNELS = 12  # what a prompt can hold; a forward that launches more is shown by time
_MAX_LAUNCHES = 48  # each profiled kernel is replayed once per pass: a long forward is cut here


# Time units ncu may print (--print-units base asks for nanoseconds; older versions say "nsecond").
_TO_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def find() -> str | None:
    """The ncu executable: FORGEBENCH_NCU, else on PATH, else CUDA's usual place."""
    named = os.environ.get("FORGEBENCH_NCU")
    if named:
        return named if Path(named).is_file() else None
    usual = Path("/usr/local/cuda/bin/ncu")
    return shutil.which("ncu") or (str(usual) if usual.is_file() else None)


def wrapper(ncu: str, log_path: Path) -> list[str]:
    """The command line that runs a program under ncu, its report (CSV, base units) in log_path."""
    return [
        ncu,
        "--csv",
        "--print-units",
        "base",
        "--log-file",
        str(log_path),
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",  # the trailing slash names a push/pop range
        "--launch-count",
        str(_MAX_LAUNCHES),
        "--metrics",
        ",".join(METRICS),
    ]


def parse(report: str) -> list[dict]:
    """Kernels from ncu's CSV report (one row per kernel and metric), longest first. Lines that are
    not CSV rows (ncu's ==PROF== messages) are skipped."""
    rows = list(csv.DictReader(line for line in report.splitlines() if line.startswith('"')))
    kernels: dict[str, dict] = {}
    for row in rows:
        label = METRICS.get(row.get("Metric Name", ""))
        if label is None or not row.get("ID"):
            continue
        kernel = kernels.setdefault(row["ID"], {"kernel": row.get("Kernel Name", "?")})
        value = (row.get("Metric Value") or "").replace(",", "")
        try:
            scale = _TO_NS.get(row.get("Metric Unit", ""), 1.0) if label == "time_ns" else 1.0
            kernel[label] = float(value) * scale
        except ValueError:
            kernel[label] = value  # grid and block sizes print as "(x, y, z)"
    longest = sorted(kernels.values(), key=lambda k: -k["time_ns"] if isinstance(k.get("time_ns"), float) else 0.0)
    return longest[:_MAX_KERNELS]


# ncu's errors that no candidate causes: the machine does not let it read the counters.
_REFUSALS = ("ERR_NVGPUCTRPERM", "LibraryNotLoaded", "Failed to initialize the profiler", "not supported")


def refuses(report: str) -> bool:
    """Whether ncu failed for want of counters here, not because of the candidate it profiled."""
    return any(marker in line for line in report.splitlines() if "==ERROR==" in line for marker in _REFUSALS)


def failure(report: str) -> str:
    """The first error ncu reported, for a profile that yielded no kernel."""
    for marker in ("==ERROR==", "==WARNING=="):
        for line in report.splitlines():
            if marker in line:
                return line.split(marker, 1)[-1].strip()[:300]
    return "ncu profiled no kernel inside the forward's NVTX range"
