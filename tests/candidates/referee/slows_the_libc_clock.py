"""Class 2, clocks forged below Python: libc's clock_gettime overwritten in memory with a jump to a
function that runs CLOCK_MONOTONIC 40 times slow, so every clock of the process (Python's, torch's,
the C++ kernels') agrees with the forgery (appended to rmsnorm_cpp.py; x86-64 only)."""
# ruff: noqa: F821  (ctypes comes from rmsnorm_cpp.py, which this is appended to)

import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_SYS_CLOCK_GETTIME, _CLOCK_MONOTONIC, _SLOW = 228, 1, 40


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


_start = [None]


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Timespec))
def _slow_clock(clock, ts):
    code = _libc.syscall(_SYS_CLOCK_GETTIME, clock, ts)
    if clock == _CLOCK_MONOTONIC and code == 0:
        now = ts[0].sec * 10**9 + ts[0].nsec
        _start[0] = _start[0] if _start[0] is not None else now
        forged = _start[0] + (now - _start[0]) // _SLOW
        ts[0].sec, ts[0].nsec = divmod(forged, 10**9)
    return code


_target = ctypes.cast(_libc.clock_gettime, ctypes.c_void_p).value
_page = _target & ~0xFFF
if _libc.mprotect(_page, 0x2000, 7) != 0:
    raise OSError(ctypes.get_errno(), "mprotect")
_jump = b"\x48\xb8" + struct.pack("<Q", ctypes.cast(_slow_clock, ctypes.c_void_p).value) + b"\xff\xe0"
ctypes.memmove(_target, _jump, len(_jump))
