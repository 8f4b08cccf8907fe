"""A worker's task models and inputs: the reference's Model and the candidate's ModelNew built
under the same seed, inputs drawn on the device, the candidate's file audited and imported."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

from harness.evaluate.audit import audit
from harness.evaluate.verdict import HarnessFault, Verdict, shorten


def _to_device(value: Any, device: torch.device) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def make_inputs(reference, seed: int, device: torch.device) -> list[Any]:
    """get_inputs() under a seed, created on the device itself: drawing a GPU task's inputs on
    the CPU costs seconds per set, and reference and candidate workers draw the same values."""
    torch.manual_seed(seed)
    with device:
        return [_to_device(v, device) for v in reference.get_inputs()]


def build_model(cls, reference, seed: int, device: torch.device) -> torch.nn.Module:
    """The class built as KernelBench builds both Model and ModelNew: get_init_inputs() under the
    same seed, so parameters created in the same order get the same values."""
    torch.manual_seed(seed)
    with device:
        return cls(*reference.get_init_inputs()).to(device).eval()


def copy_parameters(source: torch.nn.Module, target: torch.nn.Module) -> str | None:
    """Give the candidate the reference's weights, by name where names match, else by order. When
    neither matches, the candidate keeps the weights its seeded construction gave it, as KernelBench
    grades it; the sentence returned says so (a wrong layout then shows as a wrong output)."""
    src, dst = source.state_dict(), target.state_dict()
    if not src:
        return None
    if all(k in dst and dst[k].shape == v.shape for k, v in src.items()):
        pairs = [(dst[k], v) for k, v in src.items()]
    elif [v.shape for v in src.values()] == [v.shape for v in dst.values()]:
        pairs = list(zip(dst.values(), src.values()))
    else:
        return (
            f"ModelNew's parameters {[(k, tuple(v.shape)) for k, v in dst.items()][:6]} do not match the "
            f"reference's {[(k, tuple(v.shape)) for k, v in src.items()][:6]}: it keeps the weights its "
            "construction under the same seed gave it (KernelBench's rule)"
        )
    with torch.no_grad():
        for d, s in pairs:
            d.copy_(s)
    return None


def load_candidate(path: Path):
    """The candidate's module, after the source audit (audit.py); its failures are its verdicts."""
    source = path.read_text(errors="replace")
    problem = audit(source)
    if problem:
        raise Verdict("rejected", problem)
    spec = importlib.util.spec_from_file_location("forgebench_candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["forgebench_candidate"] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise Verdict("compile_error", f"SyntaxError: {exc}") from exc
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in sys.stdlib_module_names:
            raise HarnessFault(
                exc.name,
                f"the worker cannot import the standard library's {exc.name} (is Python installed where the "
                "worker's user may read it? sandbox's stdlib copy should make it so)",
            ) from exc
        raise Verdict("compile_error", shorten(f"{type(exc).__name__}: {exc}")) from exc
    except Exception as exc:  # compiler output arrives here from compile_cpp and load_inline
        raise Verdict("compile_error", shorten(f"{type(exc).__name__}: {exc}")) from exc
    if not hasattr(module, "ModelNew"):
        raise Verdict("compile_error", "the candidate defines no class ModelNew(nn.Module)")
    return module
