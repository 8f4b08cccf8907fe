"""The Platform record every platform file fills in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Platform:
    name: str
    device: str
    language: str
    baselines: list[str] = field(default_factory=lambda: ["eager"])
    limit_address_space: bool = True
    # A kernel faster than this share of the measured roofline is a broken or cheating timer.
    # On a CPU, data left in a large last-level cache can beat the DRAM copy rate honestly.
    max_sol_fraction: float = 1.25
    # Modules the worker zygote imports once, so no evaluation pays for them: torch's extension
    # builder (setuptools with it) is what every `load_inline` candidate imports first.
    preload: list[str] = field(default_factory=lambda: ["torch.utils.cpp_extension"])
    # Run workers as the user nobody when the harness is root (no access to root's processes).
    drop_privileges: bool = True
    # Confine workers with Landlock where the kernel has it: no files but their own and the
    # system's, no other process's /proc files or ptrace, whichever user runs the harness.
    confine: bool = True
    # Candidates build torch C++ extensions (load_inline): torch/extension.h, precompiled once per
    # machine by the harness, is offered to their builds (harness/evaluate/precompiled.py).
    precompiled_header: bool = False

    def unavailable_reason(self) -> str | None:
        """None when this machine can run the platform, else a sentence saying why not."""
        return None

    def cache_dirs(self, cache_dir: Path) -> dict[str, Path]:
        """Build caches shared by every worker on this machine, by the variable that names each."""
        return {"FORGEBENCH_BUILD_CACHE": cache_dir / "build", "TORCH_EXTENSIONS_DIR": cache_dir / "torch_extensions"}

    def worker_env(self, cache_dir: Path) -> dict[str, str]:
        """Variables the worker needs to build and cache kernels under cache_dir."""
        # (The thread pools' wait policies are in every worker's environment: sandbox.QUIET_POOLS.)
        return {k: str(v) for k, v in self.cache_dirs(cache_dir).items()}
