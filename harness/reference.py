"""Importing a KernelBench-format reference file (Model, get_inputs, get_init_inputs).

Its own module, free of the task loader, because the worker imports it on the GPU side.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from harness.errors import ForgeBenchError

CONTRACT = ("Model", "get_inputs", "get_init_inputs")


def load_reference_module(path: Path, name: str = "forgebench_reference") -> types.ModuleType:
    """Import a KernelBench-format file and check it has Model, get_inputs, get_init_inputs."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ForgeBenchError(f"{path}: cannot be imported as Python; check the file name ends in .py.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ForgeBenchError(f"{path}: importing it failed ({type(exc).__name__}: {exc}); fix the reference.") from exc
    missing = [n for n in CONTRACT if not hasattr(module, n)]
    if missing:
        raise ForgeBenchError(
            f"{path}: defines no {', '.join(missing)}; a reference needs class Model(nn.Module), "
            "get_inputs() and get_init_inputs() (the KernelBench contract)."
        )
    return module
