"""The workers of a refereed evaluation (referee.py): each answers the referee's orders over its link.

The reference session (trusted: the task's own code, never near a candidate) draws each call's
inputs under the referee's secret seeds, runs eager PyTorch, and judges the candidate's outputs that
the referee copies to it. The candidate session runs forward on the inputs the referee wrote into
its shared memory and copies the outputs there; everything else it says is diagnosis. Its second
line of checks (the op recorder, the harness's integrity, the clocks, work after return) runs at the
end and can only make its verdict worse, never better.
"""

from __future__ import annotations

import ctypes
import traceback
from pathlib import Path
from time import perf_counter
from typing import Any

import torch

from harness import serial
from harness.devices import Device
from harness.evaluate import arena, observers
from harness.evaluate.candidate_run import Watched, _changed, _reject_replaced_clocks, _snapshot, _torch_compute
from harness.evaluate.checks import agrees, compare, flatten
from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
from harness.evaluate.protocol import Answer, Command, Layout, Order, decode, encode
from harness.evaluate.reference_run import expected_outputs
from harness.evaluate.report import WorkerReport
from harness.evaluate.timing import _raw, load_into
from harness.evaluate.verdict import Verdict, shorten
from harness.platforms import build_cache

_asked = observers.asked


def _copy_outputs(out: Any, into: list[torch.Tensor]) -> str | None:
    """forward's outputs copied into the region's tensors, or why they do not fit the reference's."""
    try:
        got = flatten(out)
    except TypeError as exc:
        return str(exc)
    if len(got) != len(into):
        return f"forward returned {len(got)} tensors; the reference returns {len(into)}"
    for i, (g, slot) in enumerate(zip(got, into)):
        if tuple(g.shape) != tuple(slot.shape) or g.dtype != slot.dtype:
            return f"output {i} is {g.dtype} {tuple(g.shape)}; the reference's is {slot.dtype} {tuple(slot.shape)}"
        if type(g) is torch.Tensor and g.is_contiguous() and g.device.type == "cpu":
            # libc's memcpy, not PyTorch's copy kernel: the referee's census (census.py) counts time in
            # PyTorch's library as the candidate's use of it, and this copy is the harness's.
            ctypes.memmove(slot.data_ptr(), g.data_ptr(), g.numel() * g.element_size())
        else:
            slot.copy_(g)
    return None


def _scaled(inputs: list[Any], scale: float) -> list[Any]:
    if scale == 1.0:
        return inputs
    return [v * scale if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs]


def _plain_scalars(inputs: list[Any]) -> list[Any]:
    return [v for v in inputs if not isinstance(v, torch.Tensor)]


def _layout(folder: Path, inputs: list[Any], out: Any) -> tuple[Layout, dict[str, arena.Region]]:
    layout = arena.layout_of(inputs, flatten(out))
    sizes = {"pristine": layout.input_bytes, "working": layout.input_bytes}
    sizes.update(eager=layout.output_bytes, got=layout.output_bytes)
    return layout, {name: arena.Region(folder / f"{name}.bin", size, create=True) for name, size in sizes.items()}


class _Draws:
    """Each call's inputs under the referee's seed: get_inputs() drawn afresh, or, for a task whose
    draw takes longer than FRESH_DRAW_MS (a CPU drawing tens of millions of normals), one of POOL
    fresh draws made earlier in the session, rotated by a number of elements the seed gives."""

    POOL, FRESH_DRAW_MS = 3, 20.0

    def __init__(self, reference, on: torch.device):
        self.reference, self.on, self.pool, self.slow = reference, on, [], False

    def draw(self, seed: int, scale: float) -> list[Any]:
        if scale == 1.0 and self.slow and len(self.pool) == self.POOL:
            source = self.pool[seed % self.POOL]
            rolled = [v.clone() if isinstance(v, torch.Tensor) else v for v in source]
            load_into(rolled, source, roll=seed >> 8)
            return rolled
        start = perf_counter()
        drawn = make_inputs(self.reference, seed, self.on)
        self.slow = (perf_counter() - start) * 1e3 > self.FRESH_DRAW_MS
        if scale == 1.0 and len(self.pool) < self.POOL:
            self.pool.append(drawn)
        return _scaled(drawn, scale)


def serve_reference(request: dict, device: Device, reference) -> WorkerReport:
    on = device.torch_device()
    folder = Path(request["result_path"]).parent
    model = build_model(reference.Model, reference, request["init_seed"], on)
    drawn = make_inputs(reference, request["first_seed"], on)
    layout, regions = _layout(folder, drawn, model(*drawn))
    pristine = regions["pristine"].tensors(layout.inputs)
    working = regions["working"].tensors(layout.inputs)
    eager, got = regions["eager"].tensors(layout.outputs), regions["got"].tensors(layout.outputs)
    link = arena.WorkerEnd(folder)
    link.send(encode(Answer(True, layout=layout)))
    draws, last = _Draws(reference, on), None
    while True:
        order = decode(Command, link.receive())
        if order.order is Order.FINISH:
            return WorkerReport("correct")
        answer = Answer(True)
        if order.order is Order.DRAW:
            drawn = draws.draw(order.seed, order.scale)
            if order.scale != 1.0 and not all(bool(t.isfinite().all()) for t in flatten(model(*drawn))):
                answer = Answer(False, f"eager's output is not finite on inputs x{order.scale:g}")
            else:
                for slot, value in zip(pristine, drawn):
                    if isinstance(slot, torch.Tensor):
                        _raw(slot).copy_(_raw(value))
                answer.scalars = _plain_scalars(drawn)
        elif order.order is Order.CALL:
            last = model(*[w if isinstance(w, torch.Tensor) else v for w, v in zip(working, drawn)])
            _copy_outputs(last, eager)
        elif order.order is Order.BLANK:
            _copy_outputs(last, eager)  # the copy a call's bracket holds, without the call
        elif order.order is Order.JUDGE:
            expected = expected_outputs(model, drawn, request)
            mismatch = compare(expected.outputs, [g.clone() for g in got], request.get("tolerance"), expected.bounds)
            answer = Answer(mismatch is None, mismatch.reason if mismatch else "", tolerance=expected.basis)
        elif order.order is Order.AGREE:
            mismatch = agrees(eager, got, request.get("tolerance"))
            answer = Answer(mismatch is None, mismatch.reason if mismatch else "")
        link.send(encode(answer))


def serve_candidate(request: dict, device: Device, reference) -> WorkerReport:
    on, folder = device.torch_device(), Path(request["result_path"]).parent
    layout = serial.from_dict(Layout, request["layout"])
    ref_model = build_model(reference.Model, reference, request["init_seed"], on)
    inputs = arena.Region(folder / "call_inputs.bin", layout.input_bytes).tensors(layout.inputs)
    into = arena.Region(folder / "call_outputs.bin", layout.output_bytes).tensors(layout.outputs)
    link = arena.WorkerEnd(folder)
    if not request.get("profiler_failure"):
        device.warm_profiler()  # its threads exist before the candidate counts them (torch_until_profiled)
    observers.install()  # before the candidate's code runs, so it can only reach the noting wrappers
    _snapshot()
    start = perf_counter()
    candidate = load_candidate(Path(request["candidate_path"]))
    build_s = perf_counter() - start
    notes: dict[str, str] = {}
    try:
        model = build_model(candidate.ModelNew, reference, request["init_seed"], on)
        weights = copy_parameters(ref_model, model)
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}"
        raise Verdict("runtime_error", shorten(reason)) from exc
    if weights:
        notes["weights"] = weights
    watched = Watched(model)
    link.send(encode(Answer(True, phases={"build_s": build_s})))
    args: list[Any] = list(inputs)
    while True:
        order = decode(Command, link.receive())
        if order.order is Order.FINISH:
            break
        args = [t if isinstance(t, torch.Tensor) else v for t, v in zip(inputs, _fill(layout, order.scalars))]
        try:
            problem = _copy_outputs(watched(*args), into)
            answer = Answer(problem is None, problem or "", verdict="incorrect")
        except Exception as exc:
            reason = shorten(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}")
            answer = Answer(False, reason, verdict="runtime_error")
        link.send(encode(answer))
    return _second_line(watched, args, request, device, notes)


def _fill(layout: Layout, scalars: list[Any]) -> list[Any]:
    rest = iter(scalars)
    return [None if slot is not None else next(rest, None) for slot in layout.inputs]


def _second_line(watched: Watched, args: list[Any], request: dict, device: Device, notes: dict) -> WorkerReport:
    """The checks that need the candidate's process, after the referee has what it decides on: they
    can reject a candidate, never vouch for one (the candidate can edit anything they read)."""
    try:
        _reject_replaced_clocks()
        _, _, kernels = device.busy_ms(watched, args)  # every thread's ATen ops (the recorder sees one)
        problem = device.escaped_work(watched, args, 0.0) or watched.not_plain or _asked() or _changed()
        if problem:
            raise Verdict("rejected", problem)
        used = _torch_compute(watched, list(kernels), request, device)
        _reject_replaced_clocks()
    except Verdict:
        raise
    except Exception as exc:
        raise Verdict("runtime_error", shorten(f"{type(exc).__name__}: {exc}")) from exc
    builds = build_cache.BUILDS
    report = WorkerReport(
        "correct", cached_build=bool(builds) and all(b.cached for b in builds), checks_skipped=notes, torch_ops=used
    )
    if request.get("profile"):
        from harness.evaluate.profile import top_kernels

        try:
            report.profile = top_kernels(watched.model, args, device)
        except Exception as exc:  # advisory only
            report.profile = {"error": shorten(f"{type(exc).__name__}: {exc}", 500)}
    return report
