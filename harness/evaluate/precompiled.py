"""torch/extension.h precompiled once per machine, and offered to candidates' builds.

A `load_inline` build spends most of its C++ compile parsing torch/extension.h (docs/regrade.md):
a regrade of a published set, or a CPU suite whose candidates are C++ extensions, parses it once a
candidate. GCC uses `torch/extension.h.gch` in place of the header when it finds one beside it in
an include folder searched before torch's own and it was made with the same options, else it reads
the header as usual: so the harness (never a candidate) makes the .gch with the flags torch gives
main.cpp (read from the build.ninja torch writes for an empty extension), one per common choice of
`extra_cflags`, in a folder of its own beside a header that includes the real one, and offers that
folder to candidate workers through CPATH (searched before the `-isystem` folders torch names).
A candidate's compiled code is the same either way; only the parse is skipped.

Trust: what a .gch holds is compiled into the extension that includes it, so a .gch a candidate
could write would put its code into other candidates' kernels. The folder is made by this process,
written whole and renamed into place, and used only while it and every folder below the system's
temporary folder to it belong to this user and no one else may write them; workers never get it
among their writable folders (sandbox.Confinement; as root they run as nobody).

Made on the start of the first candidate worker whose source names torch's extension header or
`load_inline` (a hint read from the source: others, such as the cpu platform's own g++ builds, never
parse it, so a run of them never waits), which waits for it (about 50 s on two cores, once per
machine: later runs find it), so that every build after it skips the parse (a cold build of a C++
extension on two cores: 28 s, 11 s with it; docs/regrade.md). One build per machine (a file lock
across harness processes); a failed one is said once and the builds go on without it.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

# extra_cflags as KernelBench's solutions pass them: none (or [""], the same flags) and -O3. A
# variant GCC finds invalid for a build is skipped; with none valid it reads the header.
VARIANTS = {"default": [], "O3": ["-O3"]}
_BUILD_TIMEOUT_S = 600.0
WRAPPER = "#pragma GCC system_header\n#include_next <torch/extension.h>\n"


def wanted(source: str) -> bool:
    """Whether a candidate's build may parse torch/extension.h. Read from untrusted text, it decides
    nothing but whether a build waits for the header to be made."""
    return "torch/extension.h" in source or "load_inline" in source or "cpp_extension" in source


class PrecompiledHeader:
    def __init__(self, enabled: bool, root: Path | None = None):
        self.enabled = enabled
        self.root = root or Path(tempfile.gettempdir()).resolve() / f"forgebench-pch-{os.getuid()}"
        self.failed = ""  # why it could not be made or used, once it could not
        self._folder: Path | None = None
        self._lock = threading.Lock()

    def folder(self) -> Path | None:
        """The folder for CPATH, made on the first call (the others wait for it) and checked at each;
        None where it is off or could not be made or trusted."""
        if not self.enabled:
            return None
        with self._lock:
            if self._folder is None and not self.failed:
                try:
                    self._folder = make(self.root)
                except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
                    self._fail(f"torch/extension.h could not be precompiled ({exc})")
            if self._folder is not None and not _trusted(self._folder, self.root.parent):
                self._fail(f"{self._folder} is no longer this user's alone")
                self._folder = None
            return self._folder

    def for_candidate(self, candidate: Path) -> Path | None:
        """The folder for the CPATH of the worker building this candidate file, where its source may
        parse the header (wanted)."""
        try:
            source = candidate.read_text(errors="replace")
        except OSError:
            return None
        return self.folder() if wanted(source) else None

    def _fail(self, why: str) -> None:
        self.failed = why
        logging.getLogger(__name__).warning("%s; candidates' C++ builds parse it as usual", why)


def make(root: Path) -> Path:
    """The folder holding torch/extension.h's precompiled variants for this compiler, torch and
    Python, made if it is not there yet (by this process or another harness's, under a file lock)."""
    compiler, flags, header = main_cpp_flags()
    name = key(compiler, flags, header)
    _own_folder(root)
    folder = root / name
    with open(root / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "torch" / "extension.h.gch").is_dir():
            _build(folder, compiler, flags, header)
    if not _trusted(folder, root.parent):
        raise RuntimeError(f"{folder} is not this user's alone")
    return folder


def key(compiler: str, flags: list[str], header: str) -> str:
    """The folder's name: what the .gch files depend on (GCC refuses one made by another version)."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    made = [compiler, version, header, *flags, repr(VARIANTS), WRAPPER]
    return hashlib.sha256("\n".join(made).encode()).hexdigest()[:20]


def _build(folder: Path, compiler: str, flags: list[str], header: str) -> None:
    """Each variant compiled into a new folder, renamed into place whole (a killed build leaves
    only a partial folder, which the next build removes)."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    variants = partial / "torch" / "extension.h.gch"
    variants.mkdir(parents=True)
    # Where no variant is valid for a build (other flags; nvcc's preprocessing of a .cu), the header is
    # read from torch's folder as before, still a system header (no warnings of torch's own).
    (partial / "torch" / "extension.h").write_text(WRAPPER)
    running = {
        name: subprocess.Popen(
            [compiler, "-x", "c++-header", header, "-o", str(variants / f"{name}.gch"), *flags, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, extra in VARIANTS.items()
    }
    for name, proc in running.items():
        out, _ = proc.communicate(timeout=_BUILD_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"{compiler} failed on variant {name}: {out.strip()[-300:]}")
    for path in (partial, *partial.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(partial, folder)


def main_cpp_flags() -> tuple[str, list[str], str]:
    """The compiler, the flags torch compiles an extension's main.cpp with (its name's define left
    out: it names each extension, and main.cpp defines the module with it, not the header) and
    torch/extension.h's path, read from the build.ninja torch writes for an empty extension."""
    from torch.utils import cpp_extension

    header = Path(cpp_extension.include_paths()[0]) / "torch" / "extension.h"
    if not header.is_file():
        raise ValueError(f"no {header}")
    write = cpp_extension._write_ninja_file_to_build_library  # private: read tolerantly
    wanted = {
        "name": "forgebench_pch",
        "extra_cflags": [],
        "extra_cuda_cflags": [],
        "extra_sycl_cflags": [],
        "extra_ldflags": [],
        "extra_include_paths": [],
        "with_cuda": False,
        "with_sycl": False,
        "is_standalone": False,
    }
    with tempfile.TemporaryDirectory() as tmp:
        ninja = Path(tmp) / "build.ninja"
        known = {k: v for k, v in wanted.items() if k in inspect.signature(write).parameters}
        write(path=str(ninja), sources=[str(Path(tmp) / "main.cpp")], **known)
        lines = dict(line.split(" = ", 1) for line in ninja.read_text().splitlines() if " = " in line)
    compiler = shutil.which(lines.get("cxx", "c++").strip())
    if compiler is None:
        raise ValueError("no C++ compiler on PATH")
    flags = shlex.split(lines.get("cflags", "")) + shlex.split(lines.get("post_cflags", ""))
    return compiler, [f for f in flags if not f.startswith("-DTORCH_EXTENSION_NAME=")], str(header)


def _own_folder(root: Path) -> None:
    root.mkdir(mode=0o755, exist_ok=True)
    if not _trusted(root, root.parent) and root.lstat().st_uid == os.getuid():
        root.chmod(0o755)  # made by this user under a umask that let others write
    if not _trusted(root, root.parent):
        raise RuntimeError(f"{root} is not this user's alone (made by another user, or writable by others)")


def _trusted(path: Path, top: Path) -> bool:
    """Whether `path` and each folder above it up to `top` (excluded) belong to this user and only
    this user may write them, and so each file in `path` (a file anyone else could replace is
    anyone's code)."""
    try:
        inside = list(path.rglob("*")) if path.is_dir() else []
        here = path
        while here != top:
            if here.parent == here:
                return False  # `top` is not above it
            inside.append(here)
            here = here.parent
        return all(p.lstat().st_uid == os.getuid() and not p.lstat().st_mode & 0o022 for p in inside)
    except OSError:
        return False
