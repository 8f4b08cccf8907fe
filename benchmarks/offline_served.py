"""Which problems of a KernelBench level the offline model writes a kernel for, per platform (no device).

Builds each problem's prompt as a run would and asks the model's planner whether a template fits:
`python benchmarks/offline_served.py ../shared/data/kernelbench/level1`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.llm.offline.prompt import parse_task
from harness.llm.offline.writers import plan_for
from harness.platforms.base import Platform
from harness.prompts import task_section
from harness.tasks import load_kernelbench_file

PLATFORMS = {"triton": "cuda", "cpu": "cpu"}


def served(level: Path, platform: Platform) -> list[str]:
    """The problems whose prompt on this platform gets a kernel, not a declining sentence."""
    names = []
    for path in sorted(level.glob("*.py"), key=lambda p: int(p.stem.split("_", 1)[0])):
        task = parse_task(task_section(load_kernelbench_file(path), platform))
        if task is not None and not isinstance(plan_for(task), str):
            names.append(path.stem)
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("level", type=Path, help="a folder of KernelBench problem files")
    args = parser.parse_args()
    total = len(list(args.level.glob("*.py")))
    for name, device in PLATFORMS.items():
        names = served(args.level, Platform(name=name, device=device, language=name))
        print(f"{name}: {len(names)} of {total} served: {', '.join(n.split('_', 1)[0] for n in names)}")


if __name__ == "__main__":
    main()
