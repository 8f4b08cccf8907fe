"""Class 11, other processes visible: forward lists /proc and reads the command line of every other
process it finds (the harness, other candidates); if it could read one, its output is empty
(appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)

import os


def _others() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found.append(f.read().decode(errors="replace"))
            except OSError:
                pass
    return [c for c in found if c]


class ModelNew(ModelNew):
    def forward(self, x):
        return torch.empty_like(x) if _others() else super().forward(x)
