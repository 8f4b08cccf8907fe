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

    def prompt_notes(self) -> str:
        """What a model must know to write a candidate for this platform (prompts are data)."""
        return (PROMPTS_DIR / f"platform_{self.name}.md").read_text()

    def unavailable_reason(self) -> str | None:
        """None when this machine can run the platform, else a sentence saying why not."""
        return None

    def worker_env(self, cache_dir: Path) -> dict[str, str]:
        """Variables the worker needs to build and cache kernels under cache_dir."""
        return {"FORGEBENCH_BUILD_CACHE": str(cache_dir / "build"),
                "TORCH_EXTENSIONS_DIR": str(cache_dir / "torch_extensions")}
