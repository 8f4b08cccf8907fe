"""Fixtures shared by the tests: CPU evaluators with short timing budgets, each in its own folder."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.config import compose, instantiate
from harness.evaluate import EvalSettings, Evaluator


@pytest.fixture(scope="session", autouse=True)
def workers_can_enter_tmp(tmp_path_factory) -> None:
    """Workers run as nobody under root (CI): let them through pytest's private temp folder."""
    base = tmp_path_factory.getbasetemp()
    for folder in (base, base.parent):
        folder.chmod(folder.stat().st_mode | 0o011)


@pytest.fixture(scope="module")
def make_cpu_evaluator(tmp_path_factory) -> Callable[..., Evaluator]:
    """Makes an Evaluator for the cpu platform; keyword arguments override EvalSettings."""

    def make(**settings) -> Evaluator:
        root = tmp_path_factory.mktemp("evaluator")
        root.chmod(0o711)  # the worker, as nobody, must pass through
        settings = {"timeout_s": 60, "budget_ms": 50, "warmup_ms": 10, **settings}
        platform = instantiate(compose(platform="cpu").platform, "platform")
        return Evaluator(platform, EvalSettings(**settings), root / "work", root / "cache")

    return make
