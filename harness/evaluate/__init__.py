"""The evaluator: a candidate built, checked and timed against its task in sandboxed workers.

This file is the package's face only. Its names import on first use, so a worker (which runs
`harness.evaluate.worker`) loads none of the orchestration: the Evaluator, the sandbox, ncu and
the task loader stay in the parent.
"""

from __future__ import annotations

import importlib
from typing import Any

_FACE = {
    "Evaluator": "harness.evaluate.evaluator",
    "EvalResult": "harness.evaluate.result",
    "EvalSettings": "harness.evaluate.settings",
}

__all__ = sorted(_FACE)


def __getattr__(name: str) -> Any:
    if name in _FACE:
        return getattr(importlib.import_module(_FACE[name]), name)
    raise AttributeError(f"module 'harness.evaluate' has no attribute {name!r}")
