"""The worker process: runs a reference or a candidate on seeded inputs, times it, writes records.

Run as `python -m harness.evaluate.worker REQUEST.json`. Whatever the candidate does, this
process's exit is read by the parent (sandbox.py) as a verdict, never as a harness failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

# Bind the clocks before anything a candidate can touch is imported.
from harness.evaluate import baselines, outputs, timing
from harness.evaluate.checks import OpRecorder, compare, forbidden_ops, mutated_inputs
from harness.evaluate.result import shorten
from harness.platforms import build_cache
from harness.tasks import load_reference_module


class Verdict(Exception):
    """Ends the evaluation with a verdict and a reason."""

    def __init__(self, verdict: str, reason: str):
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


def _to_device(value: Any, device: torch.device) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def make_inputs(reference, seed: int, device: torch.device) -> list[Any]:
    """get_inputs() under a seed, created on the device itself: drawing a GPU task's inputs on
    the CPU costs seconds per set, and reference and candidate workers draw the same values."""
    torch.manual_seed(seed)
    with device:
        return [_to_device(v, device) for v in reference.get_inputs()]


def build_model(cls, reference, seed: int, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(seed)
    with device:
        return cls(*reference.get_init_inputs()).to(device).eval()


def copy_parameters(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Give the candidate the reference's weights, by name where names match, else by order."""
    src, dst = source.state_dict(), target.state_dict()
    if not src:
        return
    if all(k in dst and dst[k].shape == v.shape for k, v in src.items()):
        pairs = [(dst[k], v) for k, v in src.items()]
    elif [v.shape for v in src.values()] == [v.shape for v in dst.values()]:
        pairs = list(zip(dst.values(), src.values()))
    else:
        raise Verdict(
            "runtime_error",
            f"ModelNew's parameters {[(k, tuple(v.shape)) for k, v in dst.items()]} do not match the "
            f"reference's {[(k, tuple(v.shape)) for k, v in src.items()]}",
        )
    with torch.no_grad():
        for d, s in pairs:
            d.copy_(s)


def _load_candidate(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("forgebench_candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["forgebench_candidate"] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise Verdict("compile_error", f"SyntaxError: {exc}") from exc
    except Exception as exc:  # compiler output arrives here from compile_cpp and load_inline
        raise Verdict("compile_error", shorten(f"{type(exc).__name__}: {exc}")) from exc
    if not hasattr(module, "ModelNew"):
        raise Verdict("compile_error", "the candidate defines no class ModelNew(nn.Module)")
    return module


def _timing_sets(reference, request: dict, device: torch.device) -> list[list[Any]]:
    return [make_inputs(reference, s, device) for s in request["timing_seeds"]]


def run_reference(request: dict, device: torch.device, reference) -> dict:
    """Expected outputs on the check seeds, every baseline's time (eager included), and the device's
    ceilings when the parent has none cached: all once per task, never near a candidate."""
    clock, phases = timing._perf_counter, {}
    start = clock()
    model = build_model(reference.Model, reference, request["init_seed"], device)
    check_sets = [make_inputs(reference, s, device) for s in request["check_seeds"]]
    expected = [outputs.keep(model(*inputs)) for inputs in check_sets]
    outputs.write(Path(request["outputs_path"]), expected)
    phases["outputs_s"] = clock() - start
    # Baselines are built from the first check seed's inputs and checked on the last, so a
    # baseline that kept something computed from its sample inputs shows as a mismatch.
    sample = baselines.Sample(model, check_sets[0], device)

    def check(fn) -> str | None:
        mismatch = compare(expected[-1], outputs.keep(fn(*check_sets[-1])), request.get("tolerance"))
        return mismatch.reason if mismatch else None

    start = clock()
    times = baselines.measure_all(
        request["baselines"], sample, check, _timing_sets(reference, request, device), request["baseline_timing"]
    )
    phases["baselines_s"] = clock() - start
    record = {
        "verdict": "correct",
        "baselines": {f"{name}_ms": ms for name, ms in times.ms.items()},
        "baselines_skipped": times.skipped,
        "baselines_setup_s": times.setup_s,
        "baselines_host_ms": {f"{name}_host_ms": ms for name, ms in times.host_ms.items()},
        "phases": phases,
    }
    if request.get("measure_ceilings"):
        from harness.evaluate.roofline import measure_ceilings

        start = clock()
        record["ceilings"] = measure_ceilings(device)
        phases["ceilings_s"] = clock() - start
    if device.type == "cuda":
        # Tried here, where no candidate runs, and last (CUPTI may stay attached): a profiler that
        # works here and fails under a candidate is the candidate's doing (_unseen_calls).
        record["profiler_failure"] = timing.profiler_failure(device)
    return record


def _escaped_work(model, inputs: list[Any], device: torch.device, event_ms: float) -> str | None:
    """Work still running when forward returns: side streams on a GPU, threads on a CPU."""
    if device.type == "cuda":
        host_ms, wall_ms = timing.device_wall_ms(model, inputs, device)
        if wall_ms > 1.5 * max(event_ms, host_ms) + 0.02:
            return (
                f"each call keeps the GPU busy {wall_ms:.3g} ms but its own stream only {event_ms:.3g} ms; "
                "work left running on other streams when forward returns is not allowed"
            )
        return None
    model(*inputs)
    before = time.process_time()
    time.sleep(0.1)
    busy_ms = (time.process_time() - before) * 1e3
    if busy_ms > 20:
        return (
            f"the process used {busy_ms:.0f} ms of CPU in the 100 ms after forward returned; "
            "work must finish inside forward"
        )
    return None


# How far a call's GPU work on all streams may exceed its timed time before the difference is
# called hidden. The profiled calls find part of their inputs in the L2, which the timed calls
# flush, so honest work should only shrink there; the margin is wide until the ratio of honest
# candidates has been measured on a GPU (a side stream hid 90-99% of its work in the probe).
_HIDDEN_RATIO, _HIDDEN_SLACK_MS = 1.5, 0.010


def _unseen_calls(
    model, ref_model, reference, request: dict, device: torch.device, working: list[Any]
) -> tuple[float | None, str | None]:
    """Calls on inputs drawn now from os.urandom (in the timed inputs' places), none of which the
    candidate can have seen or computed ahead, each output checked against the reference's here:
    the least busy time on a GPU with a working profiler (each call profiled by
    timing.profiled_call: the real work of one call on every stream), and the first mismatch
    (judged after the check seeds', whose reasons name their seed)."""
    profile = device.type == "cuda" and not request.get("profiler_failure")
    busy, first_mismatch = [], None
    for _ in range(request.get("unseen_calls", 0)):
        inputs = make_inputs(reference, int.from_bytes(os.urandom(4), "little"), device)
        with torch.no_grad():
            expected = outputs.keep(ref_model(*inputs))
        timing.load_into(working, inputs)
        if not profile:
            out = model(*working)
        else:
            try:
                out, ms = timing.profiled_call(model, working)
            except timing.ProfilerFailure as exc:
                raise Verdict(
                    "rejected",
                    f"the GPU profiler works on this machine (the reference's worker tried it) but failed under the "
                    f"candidate ({exc}); the hidden-work check cannot be turned off",
                ) from exc
            busy.append(ms)
        got = outputs.keep(out)  # or why forward's result holds no tensors
        mismatch = None if isinstance(got, str) else compare(expected, got, request.get("tolerance"))
        reason = got if isinstance(got, str) else getattr(mismatch, "reason", None)
        if reason and first_mismatch is None:
            first_mismatch = f"{reason} (on an input drawn after timing)"
    return (min(busy) if busy else None), first_mismatch


def _reject_replaced_clocks() -> None:
    replaced = timing.replaced_clocks()
    if replaced:
        raise Verdict(
            "rejected",
            f"the candidate replaced {', '.join(replaced)}; the harness's clocks are not the candidate's "
            "to change (it times with its own copies, bound before the candidate loaded)",
        )


def _skipped_checks(request: dict, device: torch.device) -> dict[str, str]:
    if device.type != "cuda":
        return {}
    if not request.get("unseen_calls"):
        return {"hidden_work": "evaluate.unseen_calls is 0"}
    if request.get("profiler_failure"):
        return {"hidden_work": f"the GPU profiler does not work here ({request['profiler_failure']})"}
    return {}


def _hidden_work(busy_ms: float | None, event_ms: float) -> str | None:
    """Work the timed stream's events did not see: a side stream that forward joins back before it
    returns, but that never waited for the timed stream, starts during the L2 flush (or the GPU
    lead) queued ahead of the start event and hides its time (benchmarks/side_stream_probe.py: a
    178 µs matmul timed at 2.5 µs on the H200)."""
    if busy_ms is not None and busy_ms > _HIDDEN_RATIO * event_ms + _HIDDEN_SLACK_MS:
        return (
            f"a call keeps the GPU busy {busy_ms:.3g} ms on all its streams, but the timed stream saw only "
            f"{event_ms:.3g} ms: work on another stream that did not first wait for the current one "
            "(side.wait_stream(torch.cuda.current_stream())) ran outside the timer, which is not allowed"
        )
    return None


def _check_candidate(model, reference, request: dict, device: torch.device, working: list[Any]) -> list[Any]:
    """Outputs on the check seeds; rejects input mutation and calls of PyTorch compute ops."""
    kept = []
    for seed in request["check_seeds"]:
        inputs = make_inputs(reference, seed, device)
        before = timing.clone_inputs(inputs)
        kept.append(outputs.keep(model(*inputs)))
        mutation = mutated_inputs(before, inputs)
        if mutation:
            raise Verdict("rejected", mutation)
    with OpRecorder() as recorder:
        model(*working)
    forbidden = forbidden_ops(recorder.ops)
    if forbidden:
        raise Verdict(
            "rejected",
            f"forward calls PyTorch compute ops ({', '.join('aten.' + op for op in forbidden[:5])});"
            " the computation must be the candidate's own kernels",
        )
    return kept


_PROFILE_CALLS = 5
_PROFILE_TOP = 10


def _profile(model, inputs: list[Any], device: torch.device) -> dict:
    """The top ops and kernels by self time over a few calls, for the analyst agent: device time of
    each kernel on a GPU; host time on a CPU, where a ctypes kernel is no op and its time shows as
    the self time of a `ModelNew.forward` range."""
    from contextlib import nullcontext

    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    on_gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if on_gpu else [ProfilerActivity.CPU]
    with profile(activities=activities) as profiler:
        for _ in range(_PROFILE_CALLS):
            # On a GPU the range would be a device event of its own, counting its kernels twice.
            with nullcontext() if on_gpu else record_function("ModelNew.forward"):
                model(*inputs)
        if on_gpu:
            timing._cuda_synchronize(device)
    # On a GPU an op's self device time repeats its kernels' times: count the kernels only.
    kind, attr = (DeviceType.CUDA, "self_device_time_total") if on_gpu else (DeviceType.CPU, "self_cpu_time_total")
    events = sorted(
        (e for e in profiler.key_averages() if e.device_type == kind and getattr(e, attr) > 0),
        key=lambda e: getattr(e, attr),
        reverse=True,
    )
    total_us = sum(getattr(e, attr) for e in events)
    top = [
        {"name": e.key, "calls": e.count, "self_us": getattr(e, attr), "share": getattr(e, attr) / total_us}
        for e in events[:_PROFILE_TOP]
    ]
    return {"time": "device" if on_gpu else "host", "forward_calls": _PROFILE_CALLS, "total_us": total_us, "top": top}


def run_under_ncu(request: dict, device: torch.device, reference) -> dict:
    """A correct candidate's forward once more, for Nsight Compute (ncu.py): two calls to build and
    warm it up, then one inside the NVTX range ncu profiles. Nothing is timed or checked here."""
    from harness.evaluate.ncu import NVTX_RANGE

    ref_model = build_model(reference.Model, reference, request["init_seed"], device)
    inputs = make_inputs(reference, request["check_seeds"][0], device)
    candidate = _load_candidate(Path(request["candidate_path"]))
    model = build_model(candidate.ModelNew, reference, request["init_seed"], device)
    copy_parameters(ref_model, model)
    for _ in range(2):
        model(*inputs)
    on_gpu = device.type == "cuda"
    if on_gpu:
        timing._cuda_synchronize(device)
        torch.cuda.nvtx.range_push(NVTX_RANGE)
    model(*inputs)
    if on_gpu:
        timing._cuda_synchronize(device)
        torch.cuda.nvtx.range_pop()
    return {"verdict": "profiled"}


def run_candidate(request: dict, device: torch.device, reference) -> dict:
    phases: dict[str, float] = {}
    budget = request["timing"]
    clock = timing._perf_counter
    start = clock()  # on a GPU this includes the worker's CUDA start-up
    ref_model = build_model(reference.Model, reference, request["init_seed"], device)
    timing_sets = _timing_sets(reference, request, device)
    working = timing.clone_inputs(timing_sets[0])
    phases["inputs_s"] = clock() - start

    start = clock()
    candidate = _load_candidate(Path(request["candidate_path"]))
    phases["build_s"] = clock() - start

    try:
        start = clock()
        model = build_model(candidate.ModelNew, reference, request["init_seed"], device)
        copy_parameters(ref_model, model)
        kept = _check_candidate(model, reference, request, device, working)
        phases["check_s"] = clock() - start

        start = clock()
        measured = timing.measure(model, timing_sets, device, working=working, **budget)
        # The timed inputs' addresses, given the first check seed's contents: a result cached
        # during timing (by address or by a sample of the contents) shows here as a wrong output.
        timing.load_into(working, make_inputs(reference, request["check_seeds"][0], device))
        kept.append(outputs.keep(model(*working)))
        busy_ms, unseen_mismatch = _unseen_calls(model, ref_model, reference, request, device, working)
        _reject_replaced_clocks()  # now, while a patch that blinded the profiler is still in place
        problem = _hidden_work(busy_ms, measured.median_ms) or _escaped_work(model, working, device, measured.median_ms)
        if problem:
            raise Verdict("rejected", problem)
        _reject_replaced_clocks()
        phases["timing_s"] = clock() - start
    except Verdict:
        raise
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}"
        raise Verdict("runtime_error", shorten(reason)) from exc
    start = clock()
    outputs.write(Path(request["outputs_path"]), kept)
    phases["save_s"] = clock() - start
    builds = build_cache.BUILDS
    record = {
        "verdict": "correct",
        "cached_build": bool(builds) and all(b.cached for b in builds),
        "time_ms": measured.median_ms,
        "host_ms": measured.host_ms,
        "timing": measured.to_dict(),
        "gpu_busy_ms": busy_ms,
        "unseen_mismatch": unseen_mismatch,
        "checks_skipped": _skipped_checks(request, device),
        "phases": phases,
    }
    if request.get("profile"):
        start = clock()
        try:
            record["profile"] = _profile(model, working, device)
        except Exception as exc:  # advisory only: a profiler failure must not change the verdict
            record["profile"] = {"error": shorten(f"{type(exc).__name__}: {exc}", 500)}
        phases["profile_s"] = clock() - start
    return record


def environment(device: torch.device) -> dict[str, Any]:
    env = {"torch": torch.__version__, "python": sys.version.split()[0], "device": device.type}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(device_name=props.name, cuda=torch.version.cuda, sm_count=props.multi_processor_count)
        try:
            import triton

            env["triton"] = triton.__version__
        except ImportError:
            pass
    else:
        import platform

        env.update(device_name=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return env


def main(request_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    result_path = Path(request["result_path"])
    device = torch.device(request["device"])
    started = timing._perf_counter()
    try:
        reference = load_reference_module(Path(request["reference_path"]))
        torch.set_grad_enabled(False)  # baselines and candidates are timed for inference
        # cuDNN's heuristic picks a different convolution algorithm from run to run (a 7x7 conv at
        # 26 us in one process, 50 us in the next); timing the choices, as servers do, is stable.
        torch.backends.cudnn.benchmark = True
        runner = {"reference": run_reference, "ncu": run_under_ncu}.get(request["mode"], run_candidate)
        record = runner(request, device, reference)
    except Verdict as v:
        record = {"verdict": v.verdict, "reason": v.reason}
    record["env"] = environment(device)
    record["wall_s"] = timing._perf_counter() - started
    result_path.write_text(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
