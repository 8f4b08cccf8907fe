"""A bundle of kept kernels a user can ship: `forgebench export` writes it, `apply` installs it in
the user's own model behind the same guard (a call at an unseen signature, or a kernel that
raises, goes to PyTorch).

    OUT/manifest.json    the kernels: task, signature, source hashes, gains; device and versions
    OUT/kernels/*.py     each kept kernel
    OUT/references/*.py  each kernel's task reference (its call and signature are read from it)
    OUT/SHA256SUMS       every file's hash, the manifest's too

A bundle whose bytes do not match SHA256SUMS (a flipped byte) is refused. A bundle made on another
device, torch or triton is refused with a sentence unless the user asks for it to be verified
again here, on their own model's activations. The checksums catch corruption and edits, not a
forger who rewrites SHA256SUMS too: a bundle is code, to be taken from those one trusts.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ForgeBenchError
from harness.integrate.e2e_record import Mode

FORMAT = 1
SUMS = "SHA256SUMS"
# What must match where a bundle is applied, unless it is verified again there.
_ENV_KEYS = ("device_name", "torch", "triton", "cuda")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(found: dict, out: Path) -> Path:
    """Write the bundle of an e2e run's kept kernels (its e2e.json, as model_run and e2e wrote it):
    each kernel the guard kept in some mode, with the modes it was kept in, and the modes the
    guard weighed the model in (a mode refused there is not one the bundle is verified in)."""
    from harness.integrate.e2e_record import E2EResult

    record = E2EResult.read(found)
    verified = [m.value for m in record.verified_modes] or ["eager"]
    kept_in = {d.task_id: ([Mode.EAGER.value] if d.kept else []) for d in record.decisions}
    for mode in record.modes.values():
        for task_id in mode.kept if not mode.refused else []:
            kept_in.setdefault(task_id, [])
            if mode.mode.value not in kept_in[task_id]:
                kept_in[task_id].append(mode.mode.value)
    kept = [d for d in found["decisions"] if kept_in.get(d["task_id"])]
    if not kept:
        raise ForgeBenchError(
            f"the e2e run of {found['model']} kept no kernel, so there is nothing to export; "
            "see its decisions (forgebench e2e prints them)."
        )
    tasks = {t["id"]: t for t in found["request"]["tasks"]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "kernels").mkdir(exist_ok=True)
    (out / "references").mkdir(exist_ok=True)
    entries = []
    for decision in kept:
        task = tasks[decision["task_id"]]
        kernel, reference = out / "kernels" / f"{task['id']}.py", out / "references" / f"{task['id']}.py"
        shutil.copyfile(task["kernel_path"], kernel)
        shutil.copyfile(task["reference_path"], reference)
        entries.append(
            {
                "task_id": task["id"],
                "kernel": str(kernel.relative_to(out)),
                "reference": str(reference.relative_to(out)),
                "kernel_sha256": _sha(kernel),
                "reference_sha256": _sha(reference),
                "tolerance": task.get("tolerance") or {},
                "time_share": task.get("time_share"),
                "isolated_speedup": task.get("isolated_speedup"),
                "in_place_speedup": decision.get("in_place_speedup"),
                "modes": kept_in[task["id"]],
            }
        )
    env = found.get("env", {})
    manifest = {
        "format": FORMAT,
        "model": found["model"],
        "source_run": found.get("source_run"),
        "e2e_run": found.get("run_id"),
        "environment": {k: env.get(k) for k in _ENV_KEYS},
        "driver": found.get("driver"),
        "e2e_speedup_vs_eager": record.eager_speedup,
        "modes": verified,
        "kernels": entries,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    files = sorted(p for p in out.rglob("*") if p.is_file() and p.name != SUMS)
    (out / SUMS).write_text("".join(f"{_sha(p)}  {p.relative_to(out)}\n" for p in files))
    return out


def verify(bundle: Path) -> dict:
    """The bundle's manifest, once every file matches SHA256SUMS and the manifest's own hashes;
    ForgeBenchError naming the first file that does not."""
    sums = bundle / SUMS
    if not sums.is_file():
        raise ForgeBenchError(f"{bundle} is not a bundle (no {SUMS}); make one with `forgebench export`.")
    listed = {}
    for line in sums.read_text(errors="replace").splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    present = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file() and p.name != SUMS}
    if present != set(listed):
        extra = sorted(present ^ set(listed))
        raise ForgeBenchError(f"bundle {bundle} refused: {extra[0]} is not as exported (files added or removed).")
    for name, digest in listed.items():
        if _sha(bundle / name) != digest:
            raise ForgeBenchError(
                f"bundle {bundle} refused: {name} does not match its checksum (changed since export)."
            )
    try:
        manifest = json.loads((bundle / "manifest.json").read_text())
        for entry in manifest["kernels"]:
            for key in ("kernel", "reference"):
                if _sha(_inside(bundle, entry[key])) != entry[f"{key}_sha256"]:
                    raise ForgeBenchError(f"bundle {bundle} refused: {entry[key]} does not match the manifest's hash.")
        missing = [key for key in ("format", "environment", "kernels") if key not in manifest]
        if missing:
            raise KeyError(missing[0])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ForgeBenchError(
            f"bundle {bundle} refused: its manifest.json is not one `forgebench export` writes "
            f"({type(exc).__name__}: {exc})."
        ) from exc
    return manifest


def _environment_here(device) -> dict:
    from harness import devices

    env = devices.of(device).environment()
    return {k: env.get(k) for k in _ENV_KEYS}


@dataclass
class Installed:
    """A bundle installed in a model: call it as the model; `patch` holds the counts (calls sent to
    each kernel, fallbacks, calls left to PyTorch), `decisions` the guard's when it was re-verified."""

    run: Any
    patch: Any
    decisions: list = field(default_factory=list)

    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs)


def _inside(bundle: Path, name: object) -> Path:
    """A manifest's file name as a path inside the bundle, or ForgeBenchError (an absolute path or
    one with `..` would point at a file no checksum covers)."""
    if not isinstance(name, str) or Path(name).is_absolute() or ".." in Path(name).parts:
        raise ForgeBenchError(f"bundle {bundle} refused: its manifest names {name!r}, not a file inside the bundle.")
    return bundle / name


def _load(bundle: Path, manifest: dict, device) -> list:
    """The bundle's kernels, built on `device`. Every entry is checked first, and every file's source
    audited (the evaluator's source audit), before any of them is imported; bytecode is not written
    into the bundle (a second apply would see files it does not list)."""
    import sys

    from harness.evaluate.audit import audit
    from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
    from harness.evaluate.verdict import Verdict
    from harness.integrate.graph_patch import Kernel
    from harness.integrate.signature import task_call
    from harness.reference import load_reference_module

    entries = []
    for entry in manifest["kernels"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("task_id"), str):
            raise ForgeBenchError(f"bundle {bundle} refused: a manifest entry without a task_id ({entry!r:.100}).")
        files = [_inside(bundle, entry.get("reference")), _inside(bundle, entry.get("kernel"))]
        for path in files:
            problem = audit(path.read_text(errors="replace"))
            if problem:
                raise ForgeBenchError(f"bundle {bundle} refused: {path.name}: {problem}")
        entries.append((entry["task_id"], *files))
    kernels = []
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        for task_id, reference_path, kernel_path in entries:
            try:
                reference = load_reference_module(reference_path, f"bundle_reference_{task_id}")
                call = task_call(reference, make_inputs(reference, 0, device))
                module = build_model(load_candidate(kernel_path).ModelNew, reference, 0, device)
                copy_parameters(build_model(reference.Model, reference, 0, device), module)
            except Exception as exc:  # a Verdict of the audit, NotIntegrable, or the code's own failure
                why = exc.reason if isinstance(exc, Verdict) else f"{type(exc).__name__}: {exc}"
                raise ForgeBenchError(f"bundle {bundle}: the kernel of {task_id} does not load ({why[:300]}).") from exc
            kernels.append(Kernel(task_id, call, module))
    finally:
        sys.dont_write_bytecode = writes
    return kernels


def apply(
    model,
    bundle: str | Path,
    example_inputs: tuple | list | dict | None = None,
    reverify: bool = False,
    mode: str = "eager",
):
    """Install a bundle's kernels in `model`, returning a callable to use in its place (the model
    compiled with the graph pass of graph_patch.py): each call at a captured signature goes to its
    kernel, every other call (and any whose kernel raises) to PyTorch. Refuses a tampered bundle, and one made on
    another device or torch/triton version unless `reverify`: then each kernel is checked and timed
    again on the model's own activations for `example_inputs` (guard.py) and kept only if it passes.
    `mode` (e2e_record.Mode): how the model will run; only a mode the bundle was verified in is
    taken, with the kernels kept in that mode (_installed)."""
    import torch

    from harness import devices
    from harness.integrate import guard, modes
    from harness.integrate.graph_patch import Patch
    from harness.integrate.traced import Traced

    bundle = Path(bundle)
    manifest = verify(bundle)
    if manifest.get("format") != FORMAT:
        raise ForgeBenchError(f"bundle {bundle} is format {manifest.get('format')}; this ForgeBench reads {FORMAT}.")
    verified = manifest.get("modes") or [Mode.EAGER.value]  # a bundle of before modes was weighed in eager
    if mode not in verified:
        raise ForgeBenchError(
            f"apply(..., mode={mode!r}): bundle {bundle} was verified in {', '.join(verified)} only; pass one of "
            f"those, or run `forgebench e2e --modes {mode}` and export again."
        )
    manifest = {**manifest, "kernels": [e for e in manifest["kernels"] if mode in e.get("modes", [Mode.EAGER.value])]}
    params = list(model.parameters()) + list(model.buffers())
    device = params[0].device if params else torch.device("cpu")
    cannot = modes.unavailable(Mode(mode), devices.of(device))
    if cannot:
        raise ForgeBenchError(f"apply(..., mode={mode!r}): {cannot}; pass mode='eager'.")
    here, there = _environment_here(device), manifest["environment"]
    differs = [f"{k} {there.get(k)} there, {here.get(k)} here" for k in _ENV_KEYS if there.get(k) != here.get(k)]
    if differs and not reverify:
        raise ForgeBenchError(
            f"bundle {bundle} was made elsewhere ({'; '.join(differs)}); pass reverify=True with example_inputs "
            "to check and time its kernels again on this machine."
        )
    if reverify and example_inputs is None:
        raise ForgeBenchError(
            "apply(..., reverify=True) needs example_inputs: the kernels are checked on the model's own."
        )
    kernels = _load(bundle, manifest, device)
    traced, decisions = Traced(model), []  # one trace for the checks and the installed model
    if reverify:

        def run(compiled):
            return compiled(**example_inputs) if isinstance(example_inputs, dict) else compiled(*example_inputs)

        recorded, left_open, _ = guard.record(traced, run, kernels)
        tolerance = {e["task_id"]: e.get("tolerance") or {} for e in manifest["kernels"]}
        decisions = [
            guard.decide(k, recorded[k.task_id], tolerance[k.task_id], device, 300.0, left_open.get(k.task_id))
            for k in kernels
        ]
        kept = [k for k, d in zip(kernels, decisions) if d.kept]
        kernels = guard.confirm(traced, run, kept, decisions, tolerance)
    return _installed(Mode(mode), model, traced, Patch(kernels), decisions)


def _installed(mode: Mode, model, traced, patch, decisions: list) -> Installed:
    """The model with the patch's kernels in `mode`; with no kernel left, nothing goes in: the model
    runs as it is in that mode, not as its traced graph."""
    import torch

    from harness.integrate import modes

    if mode in modes.COMPILED:
        graphs = mode in modes.GRAPHED
        if patch.kernels:
            return Installed(patch.compile(model, inductor=True, cudagraphs=graphs), patch, decisions)
        return Installed(torch.compile(model, mode="reduce-overhead" if graphs else None), patch, decisions)
    run = traced.using(patch) if patch.kernels else model
    return Installed(modes.Replayed(run) if mode is Mode.CUDA_GRAPH else run, patch, decisions)
