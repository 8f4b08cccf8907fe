"""KernelBench-format files of one input, written where a test needs a task the repository lacks."""

from __future__ import annotations

from pathlib import Path


def one_input_task(folder: Path, name: str, forward: str, inputs: str) -> str:
    """A task file `name`.py in `folder` whose Model returns `forward` (an expression of x) on the
    input `inputs` draws; its path, as --tasks and resolve_one take it."""
    folder.chmod(0o711)  # the reference worker runs as nobody under root: it must pass through
    path = folder / f"{name}.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        f"    def forward(self, x):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    return str(path)


def model_new(forward: str) -> str:
    """A candidate whose ModelNew returns `forward` (an expression of x)."""
    head = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    return f"{head}    def forward(self, x):\n        return {forward}\n"
