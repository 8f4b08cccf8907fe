"""PyTorch eager: the reference model itself."""

from harness.evaluate.baselines import Baseline

BASELINE = Baseline(
    name="eager",
    description="the reference model run by PyTorch eager",
    build=lambda sample: sample.model,
    checked=False,  # it is the reference
)
