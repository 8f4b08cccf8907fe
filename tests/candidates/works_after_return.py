"""Plants work that escapes the timer: forward returns at once and a thread it started keeps the
CPU busy afterwards (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (ModelNew comes from rmsnorm_cpp.py, which this is appended to)

import threading


def _spin(seconds: float) -> None:
    import time

    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class ModelNew(ModelNew):
    def forward(self, x):
        y = super().forward(x)
        threading.Thread(target=_spin, args=(0.15,), daemon=True).start()
        return y
