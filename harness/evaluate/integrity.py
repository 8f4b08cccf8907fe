"""Whether the candidate changed the harness it runs inside: every module of harness.* and the
classes and instances they define, as they were before the candidate loaded.

The candidate shares the worker's interpreter, so it can rebind what the checks call
(`candidate_run._torch_compute = lambda *a: []`) or the clock the timer reads
(`harness.devices.base.perf_counter`). Nothing of the harness's is the candidate's to change.
"""

from __future__ import annotations

import sys
import types

_SNAPSHOT: dict[tuple[str, str], int] = {}


def _namespaces() -> list[tuple[str, dict]]:
    spaces = []
    for name, module in list(sys.modules.items()):
        if not (name == "harness" or name.startswith("harness.")) or not isinstance(module, types.ModuleType):
            continue
        spaces.append((name, vars(module)))
        for attr, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == name:
                spaces.append((f"{name}.{attr}", dict(vars(value))))
            elif type(value).__module__.startswith("harness") and hasattr(value, "__dict__"):
                spaces.append((f"{name}.{attr}", dict(vars(value))))  # an instance: a device adapter
    return spaces


def _identities() -> dict[tuple[str, str], int]:
    found = {}
    for space, names in _namespaces():
        for key, value in names.items():
            found[(space, key)] = id(value)
            if isinstance(value, types.FunctionType):  # its body and defaults, rebound in place
                found[(space, f"{key}.__code__")] = id(value.__code__)
                found[(space, f"{key}.__defaults__")] = id(value.__defaults__)
    return found


def snapshot() -> None:
    """Remember the harness as it is now (in the worker, just before the candidate loads)."""
    _SNAPSHOT.clear()
    _SNAPSHOT.update(_identities())


def changed() -> str | None:
    """Why the candidate is rejected for changing the harness, or None."""
    now = _identities()
    # The harness's own state (caches, counters, the notes kept) changes in place, keeping its identity.
    replaced = sorted(f"{space}.{key}" for (space, key), ident in _SNAPSHOT.items() if now.get((space, key)) != ident)
    if not replaced:
        return None
    return (
        f"the candidate changed the harness ({', '.join(replaced[:5])}); the code that checks and times it "
        "is not the candidate's to change"
    )
