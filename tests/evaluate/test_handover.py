"""The handshake by which a worker hands its outputs to the judge in device memory (handover.py),
with a device whose "memory" is this process's: the worker's side on one thread, the parent's
Watch on another. The CUDA IPC itself is tested on the H200 (tests/gpu)."""

import threading

import torch

from harness.evaluate import handover


class _InProcessDevice:
    """Exports a tensor by keeping it under a key; opened() gives the same tensors back."""

    def __init__(self, refuse: bool = False):
        self.held, self.refuse = {}, refuse

    def export(self, t):
        if self.refuse:
            raise RuntimeError("cuIpcGetMemHandle failed with CUDA driver error 201")
        key = f"{len(self.held):064x}"
        self.held[key] = t
        return {"handle": key, "offset": 0, "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}

    def synchronize(self):
        pass


def _offer_and_watch(tmp_path, device, calls, judge):
    watch = handover.Watch(tmp_path, judge)
    watch.start()
    taken = []
    worker = threading.Thread(target=lambda: taken.append(handover.offer(calls, tmp_path, device)))
    worker.start()
    worker.join(timeout=10)
    watch.stop()
    return taken[0], watch


def test_the_judge_sees_the_worker_s_tensors_and_the_worker_is_told_they_were_taken(tmp_path):
    device = _InProcessDevice()
    calls = [[torch.arange(6.0).reshape(2, 3)], "forward returned None; expected a tensor"]
    seen = []

    def judge(description):
        for call in description["calls"]:
            seen.append(call.get("error") or [device.held[e["handle"]].sum().item() for e in call["tensors"]])
        return {"mismatch": None, "degenerate": None}

    taken, watch = _offer_and_watch(tmp_path, device, calls, judge)
    assert taken is True
    assert watch.answer == {"mismatch": None, "degenerate": None} and watch.unshared is None
    assert seen == [[15.0], "forward returned None; expected a tensor"]


def test_a_device_that_cannot_export_falls_back_to_the_file_with_its_reason(tmp_path):
    taken, watch = _offer_and_watch(tmp_path, _InProcessDevice(refuse=True), [[torch.ones(3)]], lambda d: {})
    assert taken is False and watch.answer is None
    assert "CUDA driver error 201" in watch.unshared


def test_a_judge_that_cannot_open_them_or_fails_falls_back_to_the_file(tmp_path):
    taken, watch = _offer_and_watch(tmp_path, _InProcessDevice(), [[torch.ones(3)]], lambda d: {"unshared": "no"})
    assert taken is False and watch.unshared == "no"

    def broken(description):
        raise OSError("the judge died")

    (tmp_path / "again").mkdir()
    taken, watch = _offer_and_watch(tmp_path / "again", _InProcessDevice(), [[torch.ones(3)]], broken)
    assert taken is False and "the judge died" in watch.unshared


def test_a_forged_description_is_not_judged(tmp_path):
    (tmp_path / handover.SHARED).write_text("[1, 2")
    watch = handover.Watch(tmp_path, lambda d: {"mismatch": None})
    watch.start()
    watch.join(timeout=10)
    assert watch.answer is None and "JSONDecodeError" in watch.unshared
    assert (tmp_path / handover.JUDGED).read_text() == "write"


def test_a_watch_whose_worker_never_offers_stops(tmp_path):
    watch = handover.Watch(tmp_path, lambda d: {"mismatch": None})
    watch.start()
    watch.stop()
    assert not watch.is_alive() and watch.answer is None and not (tmp_path / handover.JUDGED).exists()
