"""The Platform record every platform file fills in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"


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

    def prompt_notes(self) -> str:
        """What a model must know to write a candidate for this platform (prompts are data)."""
        return (PROMPTS_DIR / f"platform_{self.name}.md").read_text()

    def unavailable_reason(self) -> str | None:
        """None when this machine can run the platform, else a sentence saying why not."""
        return None

    def worker_env(self, cache_dir: Path) -> dict[str, str]:
        """Variables the worker needs to build and cache kernels under cache_dir."""
        # Passive OpenMP threads sleep when a parallel region ends, so CPU still burning after
        # forward returns is the candidate's own escaped work.
        return {"FORGEBENCH_BUILD_CACHE": str(cache_dir / "build"),
                "TORCH_EXTENSIONS_DIR": str(cache_dir / "torch_extensions"), "OMP_WAIT_POLICY": "PASSIVE"}
