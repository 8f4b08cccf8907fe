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
from harness.evaluate import arena, observers, timing
from harness.evaluate.candidate_run import Watched, _changed, _reject_replaced_clocks, _snapshot, _torch_compute
from harness.evaluate.checks import agree_calls, compare, flatten
from harness.evaluate.models import build_model, copy_parameters, load_candidate, make_inputs
from harness.evaluate.protocol import Answer, Command, Layout, Order, decode, encode
from harness.evaluate.reference_run import expected_outputs
from harness.evaluate.report import WorkerReport
from harness.evaluate.timing import _raw, clone_inputs, load_into
from harness.evaluate.verdict import HarnessFault, Verdict, shorten
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
    """The floating inputs times `scale`, each in its own layout: a view with gaps (a captured
    cache's slice) keeps its strides and its span, which the region's slot was made for."""
    if scale == 1.0:
        return inputs
    floating = lambda v: isinstance(v, torch.Tensor) and v.is_floating_point()
    return [(_raw(v) * scale).as_strided(v.shape, v.stride()) if floating(v) else v for v in inputs]


def _plain_scalars(inputs: list[Any]) -> list[Any]:
    return [v for v in inputs if not isinstance(v, torch.Tensor)]


# On a device, a region holds up to this many calls, run back to back in one bracket so that the
# referee's clock, on the host, times the device's work rather than one launch's round trip; the
# regions of all of them (three copies of the inputs and of the outputs) take at most this share of
# free device memory, and never more than _MAX_SLOT_BYTES. With 2 GiB the H200's large tasks (a
# gigabyte a call) got one slot, and each bracket paid the call's launch in full (docs/results.md).
MAX_SLOTS, _SLOT_MEMORY_SHARE, _MAX_SLOT_BYTES = 32, 0.125, 16 << 30


def _slots(layout: Layout, device: Device, more: list[Any], drawn: list[Any]) -> int:
    """How many calls each region holds: one on a device whose calls are done when they return; on
    another, as many as memory allows, if the draws' non-tensor inputs never differ (each batched
    call gets the first's)."""
    if not device.shares_memory or _plain_scalars(more) != _plain_scalars(drawn):
        return 1
    free = torch.cuda.mem_get_info()[0]
    per_call = 3 * (layout.input_bytes + layout.output_bytes)
    return max(1, min(MAX_SLOTS, int(min(free * _SLOT_MEMORY_SHARE, _MAX_SLOT_BYTES) // max(per_call, 1))))


class _Regions:
    """The reference session's memory: pristine inputs as drawn, eager's working copies and outputs,
    and the candidate's outputs as taken, each `layout.slots` calls long. On the CPU they are files
    the referee maps and copies between itself; on a device, its memory, and the candidate's own
    slots (inputs and outputs) are driver allocations handed to the candidate's worker by CUDA IPC
    and copied to and from here on the referee's orders (STAGE, TAKE)."""

    def __init__(self, folder: Path, layout: Layout, device: Device, on: torch.device):
        n, m = layout.input_bytes * layout.slots, layout.output_bytes * layout.slots
        self.layout, self.exported, self._held = layout, {}, []
        self._views: dict[tuple[str, int], list[Any]] = {}
        sizes = {"pristine": n, "working": n, "eager": m, "got": m}
        if device.shares_memory:
            from harness.devices.cuda_ipc import Allocation

            self.raw = {name: torch.zeros(max(size, 1), dtype=torch.uint8, device=on) for name, size in sizes.items()}
            for name, size in (("call_inputs", n), ("call_outputs", m)):
                allocation = Allocation(size)
                self._held.append(allocation)
                self.raw[name] = allocation.bytes
                self.exported[name] = device.export(allocation.bytes)
        else:
            self.raw = {
                name: torch.frombuffer(arena.Region(folder / f"{name}.bin", size, create=True).map, dtype=torch.uint8)
                for name, size in sizes.items()
            }

    def views(self, name: str, k: int) -> list[Any]:
        """A region's tensors for call k, made once: eager's bracket takes them for each of its
        calls, and the candidate's worker makes its own before its first."""
        if (name, k) not in self._views:
            inputs = name in ("pristine", "working", "call_inputs")
            slots = self.layout.inputs if inputs else self.layout.outputs
            stride = self.layout.input_bytes if inputs else self.layout.output_bytes
            self._views[name, k] = arena.views(self.raw[name], slots, base=k * stride)
        return self._views[name, k]

    def span(self, name: str, calls: int) -> torch.Tensor:
        inputs = name in ("pristine", "working", "call_inputs")
        return self.raw[name][: calls * (self.layout.input_bytes if inputs else self.layout.output_bytes)]

    def changed_input(self, calls: int) -> int | None:
        """Which input a call of the candidate changed (-1: bytes between them), or None."""
        if torch.equal(self.span("call_inputs", calls), self.span("pristine", calls)):
            return None
        for k in range(calls):
            got, want = self.views("call_inputs", k), self.views("pristine", k)
            for i, (g, w) in enumerate(zip(got, want)):
                if isinstance(w, torch.Tensor) and not torch.equal(_raw(g), _raw(w)):
                    return i
        return -1

    def close(self) -> None:
        for allocation in self._held:
            allocation.free()


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
            rolled = clone_inputs(source)  # each in its own layout: a slice with gaps stays one
            load_into(rolled, source, roll=seed >> 8)
            return rolled
        start = perf_counter()
        drawn = make_inputs(self.reference, seed, self.on)
        self.slow = (perf_counter() - start) * 1e3 > self.FRESH_DRAW_MS
        if scale == 1.0 and len(self.pool) < self.POOL:
            self.pool.append(drawn)
        return _scaled(drawn, scale)


def _args(tensors: list[Any], values: list[Any]) -> list[Any]:
    """A call's arguments: the slot's tensors, and the draw's values where the layout has none."""
    return [t if isinstance(t, torch.Tensor) else v for t, v in zip(tensors, values)]


def serve_reference(request: dict, device: Device, reference) -> WorkerReport:
    on = device.torch_device()
    folder = Path(request["result_path"]).parent
    model = build_model(reference.Model, reference, request["init_seed"], on)
    drawn = make_inputs(reference, request["first_seed"], on)
    layout = arena.layout_of(drawn, flatten(model(*drawn)))
    layout.slots = _slots(layout, device, make_inputs(reference, request["first_seed"] + 1, on), drawn)
    regions = _Regions(folder, layout, device, on)
    try:
        return _serve_reference(request, device, reference, model, regions)
    finally:
        regions.close()


def _serve_reference(request: dict, device: Device, reference, model, regions: _Regions) -> WorkerReport:
    link = arena.WorkerEnd(Path(request["result_path"]).parent)
    link.send(encode(Answer(True, layout=regions.layout, regions=regions.exported)))
    draws = _Draws(reference, device.torch_device())
    values: list[list[Any]] = [[] for _ in range(regions.layout.slots)]  # each slot's draw
    last: list[Any] = [None] * regions.layout.slots
    tolerance = request.get("tolerance")
    while True:
        order = decode(Command, link.receive())
        if order.order is Order.FINISH:
            return WorkerReport("correct")
        answer, calls = Answer(True), max(1, min(order.calls, regions.layout.slots))
        if order.order is Order.DRAW:
            for k in range(calls):
                drawn = draws.draw(order.seed + k, order.scale)
                if order.scale != 1.0 and not all(bool(t.isfinite().all()) for t in flatten(model(*drawn))):
                    answer = Answer(False, f"eager's output is not finite on inputs x{order.scale:g}")
                    break
                for slot, value in zip(regions.views("pristine", k), drawn):
                    if isinstance(slot, torch.Tensor):
                        _raw(slot).copy_(_raw(value))
                values[k] = drawn
            answer.scalars = _plain_scalars(values[0])
        elif order.order is Order.STAGE:
            staged = regions.span("working" if order.into == "working" else "call_inputs", calls)
            staged.copy_(regions.span("pristine", calls))
            mask(staged, order.key)
        elif order.order is Order.TAKE:
            regions.span("got", calls).copy_(regions.span("call_outputs", calls))
            changed = regions.changed_input(calls)
            if changed is not None:
                answer = Answer(False, f"input {changed} was modified by forward; inputs must be left unchanged")
        elif order.order is Order.CALL:
            mask(regions.span("working", calls), order.key)
            for k in range(calls):
                last[k] = model(*_args(regions.views("working", k), values[k]))
                _copy_outputs(last[k], regions.views("eager", k))
        elif order.order is Order.BLANK:
            mask(regions.span("working", calls), order.key)
            for k in range(calls):
                _copy_outputs(last[k], regions.views("eager", k))  # the copies a call's bracket holds, without it
        elif order.order is Order.JUDGE:
            k = max(0, min(order.slot, regions.layout.slots - 1))
            inputs = _args([_clone(t) for t in regions.views("pristine", k)], values[k])
            expected = expected_outputs(model, inputs, request)
            got = [g.clone() for g in regions.views("got", k)]
            mismatch = compare(expected.outputs, got, tolerance, expected.bounds)
            answer = Answer(mismatch is None, mismatch.reason if mismatch else "", tolerance=expected.basis)
        elif order.order is Order.AGREE:
            eager = [regions.views("eager", k) for k in range(calls)]
            found = agree_calls(eager, [regions.views("got", k) for k in range(calls)], tolerance)
            if found is not None:
                k, mismatch = found
                answer = Answer(False, mismatch.reason + (f" (batched call {k + 1} of {calls})" if calls > 1 else ""))
        device.synchronize()  # each answer says its order is done, on the device too
        link.send(encode(answer))


def mask(raw: torch.Tensor, key: int) -> None:
    """raw XOR the bytes a generator seeded with `key` draws (0: none). Applied twice it undoes itself:
    on a device the reference session stages inputs masked before a bracket, and whoever is timed
    unmasks them inside it with the key the referee sends with the call, so inputs can sit in the
    candidate's memory before its bracket (its context made the device's current one, PREPARE) and be
    of no use to it until the clock runs."""
    if not key or not raw.numel():
        return
    generator = torch.Generator(device=raw.device)
    generator.manual_seed(key)
    raw.bitwise_xor_(torch.randint(0, 256, raw.shape, dtype=torch.uint8, generator=generator, device=raw.device))


def _clone(t: Any) -> Any:
    return timing.clone_inputs([t])[0] if isinstance(t, torch.Tensor) else t


def serve_candidate(request: dict, device: Device, reference) -> WorkerReport:
    from contextlib import ExitStack

    from harness.evaluate.outputs import DTYPES

    layout = serial.from_dict(Layout, request["layout"])
    with ExitStack() as held:
        folder, regions = Path(request["result_path"]).parent, request.get("regions") or {}
        if regions:  # the reference session's device memory, opened here for the session
            entries = [regions["call_inputs"], regions["call_outputs"]]
            try:
                raw_in, raw_out = held.enter_context(device.opened(entries, DTYPES))
            except Exception as exc:  # before any candidate code ran: the machine's, not the candidate's
                raise HarnessFault(
                    "harness",
                    f"the candidate's worker could not open the reference session's device memory by CUDA IPC "
                    f"({type(exc).__name__}: {exc}); workers of two users must be able to share it on this GPU",
                ) from exc
        else:
            raw_in = torch.frombuffer(arena.Region(folder / "call_inputs.bin").map, dtype=torch.uint8)
            raw_out = torch.frombuffer(arena.Region(folder / "call_outputs.bin").map, dtype=torch.uint8)
        slots = [
            (
                arena.views(raw_in, layout.inputs, base=k * layout.input_bytes),
                arena.views(raw_out, layout.outputs, base=k * layout.output_bytes),
            )
            for k in range(layout.slots)
        ]
        return _serve_candidate(request, device, reference, layout, slots, raw_in)


def _serve_candidate(
    request: dict, device: Device, reference, layout: Layout, slots: list, raw_in: torch.Tensor
) -> WorkerReport:
    on = device.torch_device()
    ref_model = build_model(reference.Model, reference, request["init_seed"], on)
    link = arena.WorkerEnd(Path(request["result_path"]).parent)
    if not request.get("profiler_failure"):
        device.warm_profiler()  # its threads exist before the candidate counts them (torch_until_profiled)
    observers.install()  # before the candidate's code runs, so it can only reach the noting wrappers
    _snapshot()
    # Set up while the referee warms eager up alone; said so before its counted solo rounds, and the
    # candidate's code runs from its LOAD on, after them.
    link.send(encode(Answer(True)))
    if decode(Command, link.receive()).order is not Order.LOAD:
        return WorkerReport("crash", "the referee ended the session before the candidate was loaded")
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
    args: list[Any] = list(slots[0][0])
    while True:
        order = decode(Command, link.receive())
        if order.order is Order.FINISH:
            break
        answer, calls = Answer(True), max(1, min(order.calls, len(slots)))
        if order.order is Order.PREPARE:
            torch.empty(1, device=on).zero_()
            device.synchronize()
            link.send(encode(answer))
            continue
        try:
            mask(raw_in[: calls * layout.input_bytes], order.key)
            values = _fill(layout, order.scalars)  # one call's non-tensor inputs, the same for every slot
            for inputs, into in slots[:calls]:
                args = _args(inputs, values)
                # The plain model inside the referee's bracket: the op recorder's few microseconds an op
                # are the harness's, and eager pays none; the second line runs forward under it.
                problem = _copy_outputs(model(*args), into)
                if problem:
                    answer = Answer(False, problem, verdict="incorrect")
                    break
            device.synchronize()  # answered when done (the referee reads the outputs itself)
        except Exception as exc:
            reason = shorten(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}")
            answer = Answer(False, reason, verdict="runtime_error")
        link.send(encode(answer))
    return _second_line(watched, args, request, device, notes)


def _fill(layout: Layout, scalars: list[Any]) -> list[Any]:
    rest = iter(scalars)
    return [None if slot is not None else next(rest, None) for slot in layout.inputs]


_OWN_STREAM_CALLS = 5


def _second_line(watched: Watched, args: list[Any], request: dict, device: Device, notes: dict) -> WorkerReport:
    """The checks that need the candidate's process, after the referee has what it decides on: they
    can reject a candidate, never vouch for one (the candidate can edit anything they read)."""
    try:
        _reject_replaced_clocks()
        _, _, kernels = device.busy_ms(watched, args)  # every thread's ATen ops (the recorder sees one)
        # The call's time on its own stream (events, on a device), against which work left running
        # elsewhere shows: evidence for this check only, never the call's recorded time.
        own_ms = 0.0
        if device.asynchronous:
            own, _ = device.time_calls(lambda: None, lambda: watched(*args), _OWN_STREAM_CALLS)
            own_ms = sorted(own)[len(own) // 2]
        problem = device.escaped_work(watched, args, own_ms) or watched.not_plain or _asked() or _changed()
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
