"""torch.compile with its default mode (Inductor)."""

import torch

from harness.evaluate.baselines import Baseline

BASELINE = Baseline(
    name="compile",
    description="torch.compile(model), default mode",
    build=lambda sample: torch.compile(sample.model),
)
