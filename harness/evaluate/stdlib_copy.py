"""A copy of the interpreter's standard library and headers where the user nobody can read them.

A worker runs as nobody when the harness is root. Where Python is installed in a folder nobody may
not enter (a pyenv in /root, mode 700), what the zygote imported before the drop still works, but
every module imported later fails (`load_inline` imports importlib.readers: "No module named ...")
and g++ cannot read Python.h. The harness then copies lib/pythonX.Y (without its tests and
site-packages) and include/ once per machine under the workers' folder, and each worker reads the
standard library and headers from the copy (zygote._use_stdlib_copy). Nothing of the user's system
is changed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import sysconfig
from pathlib import Path

ENV = "FORGEBENCH_STDLIB_COPY"
_SKIP = ("site-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "__pycache__")


def needed() -> bool:
    """Whether nobody cannot read the standard library (only meaningful when we are root)."""
    from harness.evaluate.nobody import closed_to_others

    return os.getuid() == 0 and closed_to_others(Path(sysconfig.get_path("stdlib")).resolve()) is not None


def _open_to_all(root: Path) -> None:
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


def ensure(workers_root: Path) -> Path:
    """The copy's root (holding lib/pythonX.Y and include/pythonX.Y), made once per interpreter."""
    stdlib, include = Path(sysconfig.get_path("stdlib")), Path(sysconfig.get_path("include"))
    key = hashlib.sha256(f"{sys.version}|{stdlib}".encode()).hexdigest()[:12]
    root = workers_root / f"python-{key}"
    if (root / "complete").is_file():
        return root
    staging = root.with_name(root.name + f".{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(stdlib, staging / "lib" / stdlib.name, ignore=shutil.ignore_patterns(*_SKIP), symlinks=True)
    if include.is_dir():
        shutil.copytree(include, staging / "include" / include.name, symlinks=True)
    (staging / "complete").write_text(str(stdlib))
    _open_to_all(staging)
    try:
        os.rename(staging, root)  # atomic: a concurrent run sees no copy or a whole one
    except OSError:  # another run finished its copy first
        shutil.rmtree(staging, ignore_errors=True)
    return root


def use(root: str) -> None:
    """In a worker: read the standard library and Python's headers from the copy at `root`."""
    import importlib

    stdlib = sysconfig.get_path("stdlib")
    copied = os.path.join(root, "lib", os.path.basename(stdlib))

    def moved(entries: list[str]) -> list[str]:
        return [copied + entry[len(stdlib) :] if entry.startswith(stdlib) else entry for entry in entries]

    sys.path[:] = moved(sys.path)
    # A package already imported finds its submodules by its own __path__ (importlib.readers).
    for module in list(sys.modules.values()):
        path = getattr(module, "__path__", None)
        if isinstance(path, list) and any(entry.startswith(stdlib) for entry in path):
            path[:] = moved(path)
    # Python.h for torch's cpp_extension: sysconfig builds the include path from installed_base.
    config = sysconfig.get_config_vars()
    config["installed_base"] = config["installed_platbase"] = root
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
