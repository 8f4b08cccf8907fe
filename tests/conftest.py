"""Fixtures shared by the tests: CPU evaluators with short timing budgets, each in its own folder."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.config import compose, instantiate
from harness.evaluate import EvalSettings, Evaluator


@pytest.fixture(scope="module")
def make_cpu_evaluator(tmp_path_factory) -> Callable[..., Evaluator]:
    """Makes an Evaluator for the cpu platform; keyword arguments override EvalSettings."""

    def make(**settings) -> Evaluator:
        root = tmp_path_factory.mktemp("evaluator")
        settings = {"timeout_s": 60, "budget_ms": 50, "warmup_ms": 10, **settings}
        platform = instantiate(compose(platform="cpu").platform, "platform")
        return Evaluator(platform, EvalSettings(**settings), root / "work", root / "cache")

    return make
