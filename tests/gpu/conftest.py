"""The GPU tests' evaluators share one cache folder: a kernel, a Triton or FlashInfer JIT build and
the device's ceilings are built or measured once per session, not once per evaluator (each
FlashInfer build alone takes about 40 s on the H200's host), so that tests/gpu fits one device call."""

import functools

import pytest


@pytest.fixture(scope="session")
def gpu_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu-cache")
    folder.chmod(0o711)  # the worker, as nobody, must pass through
    return folder


@pytest.fixture(scope="module")
def make_evaluator(make_evaluator, gpu_cache):
    return functools.partial(make_evaluator, cache=gpu_cache)
