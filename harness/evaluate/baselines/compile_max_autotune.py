"""torch.compile in max-autotune mode: Inductor benchmarks kernel configurations (and uses CUDA
graphs on a GPU). Compiling can take minutes; the reference worker does it once per task."""

import torch

from harness.evaluate.baselines import Baseline

BASELINE = Baseline(
    name="compile_max_autotune",
    description='torch.compile(model, mode="max-autotune")',
    build=lambda sample: torch.compile(sample.model, mode="max-autotune"),
)
