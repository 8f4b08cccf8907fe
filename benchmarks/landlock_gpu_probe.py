"""Which Landlock rules let a confined worker start CUDA? (confinement on GPU platforms.)

Each probe is a fresh child that confines itself as a worker would (harness/evaluate/confine.py,
the folders of harness/evaluate/sandbox.py plus the code roots) with one change, then calls
cuInit and cuDeviceGetCount through the driver API. The changes: nothing (the worker's rules),
Landlock's ABI-6 scoping left off, all of / readable, all of / writable, each top-level folder
of / writable on its own, and then each entry of a folder that was enough. Prints and writes
JSON: each probe's CUDA status.

    python3 benchmarks/landlock_gpu_probe.py OUT.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from harness.evaluate import confine
from harness.evaluate.sandbox import SYSTEM_READS, SYSTEM_WRITES

# confine.py is loaded alone: importing the harness package would import torch in every probe.
_CHILD = r"""
import ctypes, importlib.util, json, sys
spec = json.loads(sys.argv[1])
module = importlib.util.spec_from_file_location("confine", spec["confine"])
confine = importlib.util.module_from_spec(module)
module.loader.exec_module(confine)
if spec["abi_cap"]:
    real = confine.landlock_abi
    confine.landlock_abi = lambda: min(real(), spec["abi_cap"])
abi = confine.restrict(spec["read"], spec["write"])
cuda = ctypes.CDLL("libcuda.so.1")
status = cuda.cuInit(0)
count = ctypes.c_int(-1)
if status == 0:
    status = cuda.cuDeviceGetCount(ctypes.byref(count))
if status == 0 and spec["torch"]:
    import torch
    y = torch.ones(4, device="cuda") + 1
    torch.cuda.synchronize()
print(json.dumps({"abi": abi, "cuInit": status, "devices": count.value}))
"""


def probe(read: list[str], write: list[str], abi_cap: int = 0, torch_too: bool = False) -> dict:
    spec = {"read": read, "write": write, "abi_cap": abi_cap, "torch": torch_too, "confine": confine.__file__}
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True, text=True, timeout=120)
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {"exit": done.returncode, "stderr": done.stderr.strip().splitlines()[-3:]}


def main(out: str) -> None:
    code = sorted({sysconfig.get_paths()["purelib"], sys.prefix, sys.base_prefix, *sys.path[1:]} - {""})
    with tempfile.TemporaryDirectory() as work:
        reads, writes = [*SYSTEM_READS, *code, str(Path.cwd())], [*SYSTEM_WRITES, work]
        report = {
            "worker_rules": probe(reads, writes),
            "no_abi6_scoping": probe(reads, writes, abi_cap=5),
            "read_all": probe(["/"], writes),
            "write_all": probe(reads, ["/"]),
            "write_per_top_folder": {},
            "write_beneath": {},
        }
        tops = [f"/{top}" for top in sorted(os.listdir("/")) if os.path.isdir(f"/{top}") and f"/{top}" not in writes]
        for path in tops:
            report["write_per_top_folder"][path] = probe(reads, [*writes, path])
        # One level further down in the folders that were enough on their own; /proc/self by name,
        # which the child's restrict() opens as its own pid folder.
        for path in [p for p, r in report["write_per_top_folder"].items() if r.get("cuInit") == 0]:
            entries = [c for c in sorted(os.listdir(path)) if not c.isdigit()]  # not other processes'
            for child in entries[:80]:
                report["write_beneath"][f"{path}/{child}"] = probe(reads, [*writes, f"{path}/{child}"])
        report["worker_rules_torch"] = probe(reads, writes, torch_too=True)
    Path(out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
