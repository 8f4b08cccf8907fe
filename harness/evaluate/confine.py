"""Kernel confinement that needs no privilege, so it also guards a harness run by a normal user,
whose workers share its uid: Landlock for workers, non-dumpable trusted processes.

Landlock (Linux 5.13+, on in most distributions' kernels) lets a worker read only the folders
given, write only its own, and inspect no process outside itself: another process's
/proc/<pid>/environ, mem, maps, fd links and ptrace are refused (EACCES), whatever its uid.
The syscalls have no wrapper in Python's standard library, so they are called through ctypes.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Iterable

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86-64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 4, 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_READ = _EXECUTE | _READ_FILE | _READ_DIR
_CHANGE_TREE = sum(1 << bit for bit in range(4, 13))  # remove and make dirs, files, sockets, fifos, links
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2 and 3
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE  # the rights a rule on a file may hold
# Device ioctls (ABI 5) stay unhandled: the GPU driver is driven by them.
# ABI 6: no signals to, and no abstract unix sockets of, processes outside the worker (the harness,
# the judge, the user's X11 or D-Bus session).
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def make_undumpable() -> None:
    """Close this process to other processes of its uid: its /proc/<pid>/environ (which keeps the
    start-up environment, API keys included), mem, maps, auxv, fd, cwd, exe and ptrace then need
    CAP_SYS_PTRACE. cmdline and status stay readable. Core dumps of this process are off, and a
    debugger (gdb, py-spy) needs root to attach. execve resets it: each process calls it itself."""
    if _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _fail("PR_SET_DUMPABLE")


_PR_SET_CHILD_SUBREAPER = 36


def make_subreaper() -> None:
    """Adopt this process's orphaned descendants (instead of init): a worker's child that left
    its process group (setsid) and outlived the worker becomes this process's child, in reach."""
    if _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        _fail("PR_SET_CHILD_SUBREAPER")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or turned off."""
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def _fail(what: str) -> None:
    errno = ctypes.get_errno()
    raise OSError(errno, f"{what}: {os.strerror(errno)}")


def restrict(read: Iterable[str], write: Iterable[str]) -> int:
    """Confine this process and every child it starts, for good: read (and execute) only beneath
    `read`, read and write only beneath `write`; paths that do not exist are skipped. Returns the
    Landlock ABI version used; raises OSError when the kernel has no Landlock."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("this kernel has no Landlock (Linux 5.13+ with landlock in its lsm= list)")
    access = _READ | _WRITE_FILE | _CHANGE_TREE | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(access, 0, scoped)
    size = ctypes.sizeof(attr) if abi >= 6 else 8  # older kernels reject fields they do not know
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    try:
        for paths, allowed in ((read, _READ), (write, access)):
            for path in paths:
                _allow(ruleset, path, allowed)
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            _fail("PR_SET_NO_NEW_PRIVS")
        if _libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _allow(ruleset: int, path: str, allowed: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            allowed &= _FILE_RIGHTS
        rule = _PathBeneathAttr(allowed, fd)
        done = _libc.syscall(
            _SYS_ADD_RULE,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
        if done != 0:
            _fail(f"landlock_add_rule {path}")
    finally:
        os.close(fd)


_CLONE_NEWNS, _CLONE_NEWPID = 0x00020000, 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000


def _mount(source: bytes, target: bytes, kind: bytes | None, flags: int, data: bytes | None) -> None:
    if _libc.mount(source, target, kind, ctypes.c_ulong(flags), data) != 0:
        _fail(f"mount {target.decode()}")


def hide_other_processes(own_pid_namespace: bool) -> None:
    """Leave the worker no other process to see (as root, before it drops to nobody): with
    own_pid_namespace it becomes the first process of a PID namespace of its own (this process then
    waits for it and ends as it ended: the caller goes on only in the new process) and sees itself
    alone; else (CUDA IPC needs the device's processes in one PID namespace) it keeps the namespace
    and sees only its own user's processes (hidepid). Either way with a /proc of its own, in a mount
    namespace of its own. Raises OSError where the kernel refuses (no CAP_SYS_ADMIN)."""
    if _libc.unshare(_CLONE_NEWNS | (_CLONE_NEWPID if own_pid_namespace else 0)) != 0:
        _fail("unshare")
    if own_pid_namespace:
        pid = os.fork()
        if pid:
            _relay(pid)
    _mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None)  # nothing mounted here reaches the host
    _mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, b"hidepid=2")


def _relay(pid: int) -> None:
    """Wait for the namespace's first process and end as it ended (a signal as that signal)."""
    import signal

    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def landlock_or_warn() -> bool:
    """Whether workers can be confined with Landlock here; where not, a warning says what they can read."""
    if landlock_abi():
        return True
    as_who = "the user nobody" if os.getuid() == 0 else "your own user"
    logging.getLogger(__name__).warning(
        "this kernel has no Landlock (Linux 5.13+, landlock in its lsm= list): workers run as %s "
        "and can read every file that user can, and the /proc files of that user's other processes "
        "(a shell's start-up environment may hold API keys); run on a kernel with Landlock.",
        as_who,
    )
    return False
