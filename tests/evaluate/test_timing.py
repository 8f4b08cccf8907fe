"""The timing module on its own: each call's host time, the GPU lead, and the clocks a candidate
might replace. The evaluator's timing of whole candidates is tested in test_evaluate.py."""

from __future__ import annotations

import time

import pytest
import torch

from harness import devices, serial
from harness.devices.base import Device
from harness.evaluate import timing


def test_timing_reports_each_calls_host_time():
    measured = timing.measure(lambda x: time.sleep(0.003) or x, [[torch.ones(4)]], torch.device("cpu"), budget_ms=30)
    assert measured.host_ms >= 3.0 and serial.to_dict(measured)["host_ms"] == measured.host_ms


class _StallingQueue(Device):
    """An asynchronous device whose host time is 1 ms a call, but `slow` ms in one window: the
    timed calls' (a launch queue filled by GPU-bound work) or the few after them (a stall)."""

    asynchronous = True

    def __init__(self, slow_window: str):
        self.slow_window, self.batches = slow_window, []

    def time_calls(self, prepare, call, n, lead_cycles=0):
        self.batches.append(n)
        for _ in range(n):
            prepare(), call()
        # measure's batches: 1 lazy call, 1 estimate, the warm-up, 3 estimates, the timed calls, the few after.
        slow = {"timed": 5, "after": 6}[self.slow_window] == len(self.batches)
        return [1.0] * n, [5.0 if slow else 1.0] * n


@pytest.mark.parametrize("slow_window", ["timed", "after"])
def test_a_call_s_host_time_is_read_from_the_window_nothing_slowed(slow_window):
    device = _StallingQueue(slow_window)
    measured = timing.measure(lambda x: x, [[torch.ones(4)]], device, budget_ms=10, warmup_ms=2)
    assert len(device.batches) == 6  # the timed calls, then a few issued to an idle queue
    assert measured.host_ms == 1.0, (slow_window, device.batches)


class _LongCalls(Device):
    """An asynchronous device whose every call takes 400 ms (a full-depth LLM request's scale)."""

    asynchronous = True

    def __init__(self):
        self.batches = []

    def time_calls(self, prepare, call, n, lead_cycles=0):
        self.batches.append(n)
        return [400.0] * n, [1.0] * n


def test_a_call_longer_than_the_warm_up_is_warmed_by_two_and_its_host_read_within_the_budget():
    device = _LongCalls()
    together = timing.measure_together(
        {"a": lambda: None, "b": lambda: None}, [[]], device, budget_ms=300, warmup_ms=60
    )
    # Each: a lazy call and an estimate, one call in each of the 8 rounds, one to an idle queue.
    assert sum(device.batches) == 2 * (2 + 8 + 1), device.batches
    assert together["a"].median_ms == 400.0


def test_calls_timed_together_share_the_host_s_drift():
    # A host that slows as the run goes on (a shared machine): two equal calls timed one after the
    # other differ by the drift; timed together, in alternating rounds, they do not.
    started = time.perf_counter()

    def drifting(x):  # 1 ms a call at first, 1 ms more each 50 ms since
        time.sleep(0.001 * (1 + (time.perf_counter() - started) / 0.05))
        return x

    cpu, inputs = torch.device("cpu"), [[torch.ones(4)]]
    apart = [timing.measure(drifting, inputs, cpu, budget_ms=60, warmup_ms=1).median_ms for _ in range(2)]
    together = timing.measure_together({"a": drifting, "b": drifting}, inputs, cpu, budget_ms=60, warmup_ms=1)
    a, b = together["a"].median_ms, together["b"].median_ms
    drift = apart[1] / apart[0]
    assert drift > 1.5, apart
    # Under load (a busy CI machine, fewer rounds) some drift stays between rounds: well under apart's.
    assert max(a, b) / min(a, b) - 1 < (drift - 1) / 2, (apart, together)
    assert together["a"].runs >= 8 and together["a"].host_ms is not None


def test_a_gpu_lead_changes_nothing_on_the_cpu():
    measured = timing.measure(lambda x: x * 2, [[torch.ones(4)]], torch.device("cpu"), budget_ms=10, gpu_lead=True)
    assert measured.lead_ms == 0.0 and measured.median_ms > 0


def test_a_candidate_replacing_the_profiler_is_named(monkeypatch):
    timing.bind_clocks(devices.load("cuda"))  # the GPU adapter watches the profiler it relies on
    monkeypatch.setattr(torch.profiler, "profile", lambda *a, **k: None)
    assert "torch.profiler.profile" in timing.replaced_clocks()


def test_paired_rounds_net_eagers_times_alone_as_they_net_its_times_beside():
    # Eager 1.0 ms of work beside the candidate's 0.5 ms, each bracket 0.1 ms; eager alone read lower
    # (0.9 ms of work) counts, and a handshake that ran slow in one of its rounds cannot take its time
    # below its work: the H200 read eager alone as 1e-6 ms (a 2e-5x speedup) when each alone time
    # was less its own blank.
    beside, candidate, brackets = [1.1] * 10, [0.6] * 10, [0.1] * 10
    paired = timing.paired(beside, candidate, brackets, first_alone=[1.0, 1.0, 1.0, 1.0, 1.0])
    assert paired.ratio == pytest.approx(0.9 / 0.5)
    assert timing.paired(beside, candidate, brackets, first_alone=[1.2] * 5).ratio == pytest.approx(2.0)
