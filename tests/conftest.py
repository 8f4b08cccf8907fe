"""Fixtures shared by the tests: CPU evaluators with short timing budgets, each in its own folder."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.config import compose, instantiate
from harness.evaluate import EvalSettings, Evaluator


@pytest.fixture(autouse=True)
def workers_can_enter_tmp(tmp_path_factory) -> None:
    """Workers run as nobody under root (CI): let them through pytest's private temp folders, from
    this process's base up to pytest-of-<user>. Under `pytest tests/ -n N` the base is one level
    deeper (the controller's pytest-<n>/popen-gw<i>), so the folders are counted up to the temporary
    root rather than by number. Before every test: a pytest started by a test without a --basetemp
    of its own (xdist's controller, under `pytest suite/ -n 2`) makes pytest-of-<user> private again."""
    base = tmp_path_factory.getbasetemp()
    temproot = Path(os.environ.get("PYTEST_DEBUG_TEMPROOT") or tempfile.gettempdir()).resolve()
    # A --basetemp outside the temporary root is opened alone: its parents are the user's own folders.
    pytests_own = [folder for folder in base.parents if folder != temproot and folder.is_relative_to(temproot)]
    for folder in (base, *pytests_own):
        folder.chmod(folder.stat().st_mode | 0o011)


@pytest.fixture(scope="module")
def make_evaluator(tmp_path_factory) -> Callable[..., Evaluator]:
    """Makes an Evaluator for a conf/platform/ entry (cpu unless named), with Hydra overrides for
    the platform and keyword arguments overriding EvalSettings; each in a folder of its own, its
    caches too unless `cache` names a folder evaluators share."""

    def make(platform: str = "cpu", overrides: tuple[str, ...] = (), root=None, cache=None, **settings) -> Evaluator:
        if root is None:
            root = tmp_path_factory.mktemp(f"evaluator-{platform}")
            root.chmod(0o711)  # the worker, as nobody, must pass through
        settings = {"timeout_s": 60, "budget_ms": 50, "warmup_ms": 10, **settings}
        entry = instantiate(compose(platform=platform, overrides=list(overrides)).platform, "platform")
        return Evaluator(entry, EvalSettings(**settings), root / "work", cache or root / "cache")

    return make
