"""The best kernels back in the model they came from, behind a guard (docs/integrate.md):
`forgebench e2e` decides and measures, `forgebench export` writes a bundle, and `apply` installs
a bundle in a user's own model."""

from __future__ import annotations


def apply(model, bundle, example_inputs=None, reverify: bool = False, mode: str = "eager"):
    """Install a bundle's kernels in `model` (bundle.apply), to run in `mode` (docs/e2e-modes.md)."""
    from harness.integrate.bundle import apply as install

    return install(model, bundle, example_inputs, reverify, mode)
