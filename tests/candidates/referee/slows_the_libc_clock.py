"""Class 2, clocks forged below Python: libc's clock_gettime overwritten in memory with a jump to a C
function that runs CLOCK_MONOTONIC 40 times slow, so every clock of the process (Python's, torch's,
the C++ kernels', on every thread) agrees with the forgery (appended to rmsnorm_cpp.py; x86-64)."""
# ruff: noqa: F821  (ctypes and compile_cpp come from rmsnorm_cpp.py, which this is appended to)

import struct

_slow = compile_cpp(r"""
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
static long long base = -1;
extern "C" int slow_clock(clockid_t clock, struct timespec* ts) {
  long r = syscall(SYS_clock_gettime, clock, ts);
  if (r == 0 && clock == CLOCK_MONOTONIC) {
    long long t = ts->tv_sec * 1000000000LL + ts->tv_nsec;
    if (base < 0) base = t;
    t = base + (t - base) / 40;
    ts->tv_sec = t / 1000000000LL; ts->tv_nsec = t % 1000000000LL;
  }
  return (int)r;
}
""")
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_target = ctypes.cast(_libc.clock_gettime, ctypes.c_void_p).value
if _libc.mprotect(_target & ~0xFFF, 0x2000, 7) != 0:
    raise OSError(ctypes.get_errno(), "mprotect")
_jump = b"\x48\xb8" + struct.pack("<Q", ctypes.cast(_slow.slow_clock, ctypes.c_void_p).value) + b"\xff\xe0"
ctypes.memmove(_target, _jump, len(_jump))
