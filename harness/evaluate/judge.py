"""The judge: a long-lived trusted process that compares a candidate's outputs with the expected ones
on the task's device, so a gigabyte of GPU outputs never passes through the harness.

It runs harness code only (no reference, no candidate), as the harness's own user, with a scrubbed
environment, non-dumpable: no worker (as nobody, or as the harness's own uid) can read its memory.
The expected outputs it keeps are those a reference worker wrote, so correctness does not depend
on which process ran first.
Started by `Judge` below; reads one JSON request per line on stdin and answers one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path

from harness.errors import ForgeBenchError

# Expected outputs of this many tasks stay on the device; older ones are read again when needed.
_KEEP_TASKS = 2
# Room for the outputs file's header and padding above the tensors' own bytes.
_SLACK_BYTES = 1 << 20


# Expected outputs up to this share of the device's memory stay on it between comparisons; larger
# ones are kept in host memory and copied over one call at a time, so that a 6 GB task's 19 GB of
# expected outputs do not take the device memory its next candidate's worker needs.
_DEVICE_SHARE = 1 / 16


class _Expected:
    def __init__(self, path: Path, bounds_path: Path, adapter, tolerance: dict):
        import torch

        from harness.evaluate import outputs
        from harness.evaluate.checks import near_constant

        host = torch.device("cpu")
        self.calls = outputs.read(path, host)
        bad = [c for c in self.calls if isinstance(c, str)]
        if bad:
            raise ValueError(f"the reference's outputs are not tensors: {bad[0]}")
        # Each call's bounds, or a word where it has the fixed tolerance (tolerance.py).
        self.bounds = [b if not isinstance(b, str) else None for b in outputs.read(bounds_path, host)]
        self.nbytes = sum(t.numel() * t.element_size() for call in self.calls for t in call)
        self.degenerate = near_constant(self.calls, tolerance)
        self.device = adapter.torch_device()
        if self.nbytes + _nbytes(self.bounds) <= _DEVICE_SHARE * adapter.memory_bytes():
            self.calls, self.bounds = _moved(self.calls, self.device), _moved(self.bounds, self.device)

    def call(self, i: int) -> tuple[list, object]:
        """Call i's expected tensors and bounds, on the device."""
        return _moved(self.calls[i], self.device), _moved(self.bounds[i], self.device)


def _nbytes(value) -> int:
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return value.numel() * value.element_size() if hasattr(value, "element_size") else 0


def _moved(value, device):
    """Tensors (in lists, or None) on `device`: the same objects where they are there already."""
    if isinstance(value, list):
        return [_moved(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(_moved(v, device) for v in value)
    return value.to(device) if hasattr(value, "to") else value


def _expected(request: dict, cache: OrderedDict, adapter) -> _Expected:
    key = (request["expected"], json.dumps(request["tolerance"], sort_keys=True))
    if key not in cache:
        cache[key] = _Expected(Path(request["expected"]), Path(request["bounds"]), adapter, request["tolerance"])
        while len(cache) > _KEEP_TASKS:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return cache[key]


def _calls_needed(request: dict) -> int:
    return max(a for _, a, _ in request["pairs"]) + 1 if request["pairs"] else 0


def _compare(expected: _Expected, actual: list, request: dict) -> dict:
    from harness.evaluate.checks import compare

    if len(actual) < _calls_needed(request):
        return {"unreadable": f"it holds {len(actual)} calls' outputs; the worker writes {_calls_needed(request)}"}
    for want, got, label in request["pairs"]:
        if isinstance(actual[got], str):
            return {"mismatch": f"{actual[got]} (on {label})"}
        calls, bounds = expected.call(want)
        mismatch = compare(calls, actual[got], request["tolerance"], bounds)
        del calls, bounds  # a big task's copy on the device, freed before the next
        if mismatch:
            return {"mismatch": f"{mismatch.reason} (on {label})"}
    return {"mismatch": None, "degenerate": expected.degenerate}


def _judge(request: dict, cache: OrderedDict, adapter) -> dict:
    from harness.evaluate import outputs

    device = adapter.torch_device()
    expected = _expected(request, cache, adapter)
    actual_path = Path(request["actual"])
    calls_needed = _calls_needed(request)
    limit = expected.nbytes * max(calls_needed, 1) + _SLACK_BYTES * (calls_needed + 1)
    try:
        size = actual_path.stat().st_size
    except OSError as exc:
        return {"unreadable": f"{type(exc).__name__}: {exc}"}
    if size > limit:
        return {"unreadable": f"it is {size} bytes, more than outputs like the reference's"}
    try:
        actual = outputs.read(actual_path, device)
    except outputs.UnreadableOutputs as exc:
        return {"unreadable": str(exc)}
    return _compare(expected, actual, request)


def _judge_shared(request: dict, cache: OrderedDict, adapter) -> dict:
    """The same comparison, of outputs a worker handed over in device memory (handover.py): opened
    in place, never copied. {"unshared": why} when they cannot be opened, and the worker writes
    its file instead; {"unreadable": why} when the description is not one a worker writes."""
    from harness.evaluate import outputs

    expected = _expected(request, cache, adapter)
    entries, shape = [], []
    try:
        for call in request["shared"]["calls"][: _calls_needed(request)]:
            if "error" in call:
                shape.append(str(call["error"]))
            else:
                shape.append(len(call["tensors"]))
                entries += list(call["tensors"])
        with adapter.opened(entries, outputs.DTYPES) as tensors:
            actual, at = [], 0
            for call in shape:
                if isinstance(call, str):
                    actual.append(call)
                else:
                    actual.append(tensors[at : at + call])
                    at += call
            return _compare(expected, actual, request)
    except (KeyError, TypeError, ValueError) as exc:
        return {"unreadable": f"its description of its outputs: {type(exc).__name__}: {exc}"}
    except RuntimeError as exc:  # the driver refused (IpcFailure) or the mapping failed
        return {"unshared": f"{type(exc).__name__}: {exc}"}


def serve(device_name: str) -> None:
    import torch

    from harness import devices
    from harness.evaluate.confine import make_undumpable

    make_undumpable()  # its memory holds every task's expected outputs
    adapter = devices.load(device_name)
    torch.set_grad_enabled(False)
    cache: OrderedDict = OrderedDict()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            shared = "shared" in request
            answer = _judge_shared(request, cache, adapter) if shared else _judge(request, cache, adapter)
        except Exception as exc:  # the harness's own failure (a missing file, device memory): said, not hidden
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        # The comparison's temporaries go back to the device, for the next candidate's worker.
        adapter.empty_cache()
        print(json.dumps(answer), flush=True)


class Judge:
    """The parent's handle on a judge process, started on first use and again if it dies."""

    def __init__(self, device: str, env: dict[str, str]):
        self.device, self.env = device, env
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.evaluate.judge", self.device],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**self.env, "PYTHONUNBUFFERED": "1"},
            text=True,
            start_new_session=True,
        )
        ready = proc.stdout.readline()
        if not ready.startswith('{"ready"'):
            proc.kill()
            raise ForgeBenchError(f"the judge process failed to start on {self.device}: {ready!r}")
        return proc

    def compare(
        self,
        expected: Path,
        bounds: Path,
        actual: Path | dict,
        pairs: list[tuple[int, int, object]],
        tolerance: dict,
    ) -> dict:
        """{"mismatch": reason or None, "degenerate": reason or None}, or {"unreadable": reason}, of
        the outputs in the file `actual` or, when it is a worker's description of its outputs in
        device memory (handover.py), of those ({"unshared": why} when they cannot be opened)."""
        where = {"shared": actual} if isinstance(actual, dict) else {"actual": str(actual)}
        label = "outputs handed over in device memory" if isinstance(actual, dict) else str(actual)
        request = json.dumps(
            {"expected": str(expected), "bounds": str(bounds), **where, "pairs": pairs, "tolerance": tolerance}
        )
        with self._lock:
            for _ in range(2):
                if self._proc is None or self._proc.poll() is not None:
                    self._proc = self._start()
                try:
                    self._proc.stdin.write(request + "\n")
                    self._proc.stdin.flush()
                    answer = self._proc.stdout.readline()
                except BrokenPipeError:
                    answer = ""
                if answer:
                    break
                self._proc = None  # it died mid-request (out of memory?): start a fresh one once
            else:
                raise ForgeBenchError(f"the judge process died twice comparing {label}; see the log above")
        result = json.loads(answer)
        if "error" in result:
            raise ForgeBenchError(f"the judge could not compare {label} with {expected}: {result['error']}")
        return result

    def close(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(self._proc.pid, 9)
                    self._proc.wait()
            self._proc = None


if __name__ == "__main__":
    serve(sys.argv[1])
