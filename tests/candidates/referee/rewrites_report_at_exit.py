"""Class 1, a forged report at exit: the standard library's os._exit replaced, so that as the worker
ends it rewrites result.json claiming 1 µs a call (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (ModelNew comes from rmsnorm_cpp.py, which this is appended to)

import json
import os
from pathlib import Path

_real_exit = os._exit


def _forging_exit(code):
    for result in Path(".").glob("result.json"):
        record = json.loads(result.read_text())
        record["timing"] = {"median_ms": 0.001, "p20_ms": 0.001, "p80_ms": 0.001, "runs": 1000}
        record["torch_ops"] = []
        result.write_text(json.dumps(record))
    _real_exit(code)


os._exit = _forging_exit
