"""The referee: the harness's own process decides a candidate's verdict and time, outside the ring.

It drives two workers over their links (arena.py, protocol.py): a reference session (trusted) that
draws every call's inputs under seeds only the referee knows, runs eager PyTorch and judges outputs,
and the candidate's worker. For every call the referee writes the inputs into the candidate's shared
memory itself, times the call on its own clock from before the inputs are written until the answer
arrives, copies the outputs out at once, checks that the inputs are as written, and has the
reference session judge the outputs: every call, checked and timed alike. Eager and the candidate
are timed in alternating rounds, and the speedup is the ratio of their lower quantiles
(timing.paired). What the candidate's worker reports of itself can only make its verdict worse.

On a device (a GPU) the referee cannot touch the memory itself: the reference session, on its
orders, stages each call's inputs into the candidate's slots (device memory it owns and hands over
by CUDA IPC) inside the bracket, and takes the outputs out at once after the answer (hands.DeviceHands).
Calls are batched there, so the host's clock times device work rather than one launch's round trip.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ForgeBenchError
from harness.evaluate import timing
from harness.evaluate.arena import NOBODY, Link, LinkedWorker, WorkerGone
from harness.evaluate.census import Census, CensusUnavailable, worker_pid
from harness.evaluate.hands import DeviceHands, Freezer, HostHands, secret_seed
from harness.evaluate.protocol import Answer, Command, Layout, Order, ProtocolError, encode
from harness.evaluate.report import WorkerReport
from harness.evaluate.settings import EvalSettings
from harness.evaluate.verdict import VERDICTS, shorten

# Draws beyond the task's usual scale, within its inputs' contract (floating inputs scaled): large
# logits find a softmax without max-subtraction, tiny values an absolute tolerance too loose for them.
# A scale at which eager's own output is not finite is skipped for the task.
EXTREME_SCALES = (100.0, 1e-3)
# Each timed call's outputs are compared with eager's of the same round (checks.agree_calls: a stale or
# skipped call cannot pass); this share of them, chosen by the referee after the call, is also judged
# in full against the fp64 reference, as every check draw is.
JUDGED_SHARE = 0.25
WARMUP_ROUNDS = 2  # timed rounds not counted: the first calls of fresh inputs pay lazy set-up
_WALL_CAP_S = 60.0
# Under evaluate.torch_ops=forbid, a forward whose computing time (census.py: the samples in PyTorch's
# compute library, the candidate's own, and other libraries and generated code; not the interpreter,
# libc's copies or PyTorch's dispatcher) lies this much in PyTorch's, over at least _CENSUS_SAMPLES of
# them, is rejected. Measured on the 2-core machine: forwards of PyTorch ops 92-99%, a C++ RMSNorm
# kernel 2%, and an honest 32x32 linear kernel 68% (its own work is tiny beside the allocation of its
# output, which is in libtorch_cpu too: hence the margin).
PYTORCH_SHARE, _CENSUS_SAMPLES = 0.8, 200
COMPUTE = (
    "pytorch",
    "own",
    "other",
    "anonymous",
)  # the timed rounds stop here whatever the budget (slow judges of huge tasks)
_clock = time.perf_counter
# On a device, each bracket runs this many milliseconds of the faster side's calls (eager's, or the
# candidate's as its check draws showed it; at most Layout.slots): a bracket's fixed costs (the
# handshake, waking a process, the GPU's switch between their contexts: tens of microseconds) are
# then a few percent of what is timed for a fast kernel as for a slow one.
BATCH_MS = 3.0
SOLO_ROUNDS = 5  # on a device, eager's rounds before the candidate exists (timing.paired's first_alone)


class Decided(Exception):
    """The referee's verdict on the candidate, reached before the rounds ended."""

    def __init__(self, verdict: str, reason: str, report: WorkerReport | None = None):
        super().__init__(reason)
        self.verdict, self.reason, self.report = verdict, shorten(reason), report


@dataclass
class Refereed:
    verdict: str
    reason: str = ""
    paired: timing.Paired | None = None  # eager first, the candidate second
    calls_judged: int = 0
    tolerance: dict = field(default_factory=dict)
    report: WorkerReport | None = None  # the candidate worker's own, for diagnosis
    census: dict[str, float] = field(default_factory=dict)  # shares of sampled CPU time by library, "samples"
    census_skipped: str = ""  # why there is no census
    eager_unobserved: str = ""  # on the host: why eager's brackets ran without the census's events
    phases: dict[str, float] = field(default_factory=dict)


def _worker_ended(worker: LinkedWorker, why: str) -> Decided:
    """The candidate's worker stopped answering: its own report says how (an exit, a build failure)."""
    report = worker.report()
    if report.verdict != "correct":
        return Decided(report.verdict, report.reason, report)
    # The harness's worker writes `correct` only after the referee's last order: this report was
    # written by the candidate, which then ended its process.
    return Decided(
        "rejected",
        f"the worker ended before the referee's calls were done ({why}), leaving a report that claims `correct`: "
        "a forged record (the referee times and judges; a worker's report is only diagnosis)",
        report,
    )


class Session:
    """One candidate refereed against its task's reference."""

    def __init__(self, settings: EvalSettings, timeout_s: float, unprivileged: bool):
        self.settings, self.unprivileged, self.timeout_s = settings, unprivileged, timeout_s
        self.judged = 0
        self.tolerance: dict = {}
        self.census: Census | None = None
        self.census_skipped = ""
        # On the host, eager's and the blank's brackets are observed as the candidate's are: perf events
        # on a worker's threads slow its calls (a C++ RMSNorm read 1.6x with them on its side only,
        # 2.0x with none), so the same events run on the reference's worker while it is timed.
        self.eager_census: Census | None = None
        self.eager_unobserved = ""
        self.started_pid: int | None = None
        self.reference_pid: int | None = None

    def run(
        self,
        reference_folder: Path,
        start_reference: Callable[[Callable[[int], None]], WorkerReport],
        candidate_folder: Path,
        start_candidate: Callable[[Layout, dict, Callable[[int], None]], WorkerReport],
        own_roots: list[Path] = (),
    ) -> Refereed:
        phases: dict[str, float] = {}
        started = _clock()
        # The reference session answers each order within its own time (a judge of a large task);
        # the candidate within what is left of its time limit, at which the sandbox kills it.
        reference_wait = lambda: time.monotonic() + self.settings.reference_timeout_s
        run_reference = lambda: start_reference(lambda pid: setattr(self, "reference_pid", pid))
        self.ref = LinkedWorker(run_reference, Link(reference_folder), reference_wait)
        first = self._reference_answer(None)
        if first.layout is None:
            raise ForgeBenchError("the reference session sent no layout")
        self.layout, self.batch, solo = first.layout, 1, None
        self.once: tuple[float, float] | None = None  # on a device: eager's and the blank's single call, ms
        self.freezer = Freezer()
        owner = NOBODY if self.unprivileged else None
        if first.regions:  # a device's memory: the reference session's hands, on the referee's orders
            self.hands = DeviceHands(self._reference_answer)
        else:
            self.hands = HostHands(reference_folder, candidate_folder, self.layout, owner)
        deadline = time.monotonic() + self.timeout_s + 10.0  # the sandbox kills the worker at timeout_s
        run = lambda: start_candidate(self.layout, first.regions, lambda pid: setattr(self, "started_pid", pid))
        # The candidate's worker starts now and sets up its process (a device's context, the reference
        # session's memory opened) while eager is timed alone; it loads the candidate's code only on
        # LOAD, after those rounds, so nothing of the candidate runs beside them.
        self.cand = LinkedWorker(run, Link(candidate_folder, owner), lambda: deadline)
        result = Refereed("correct", phases=phases)
        try:
            try:
                if first.regions:  # the worker's set-up answer is read within, before the counted rounds
                    self.batch, solo = self._solo_eager()
                    phases["solo_s"] = _clock() - started
                else:
                    self.cand.ask(None)  # set up
                ready = self.cand.ask(Command(Order.LOAD))  # built and ready
                phases["start_s"] = _clock() - started
                phases["build_s"] = ready.phases.get("build_s", 0.0)  # the worker's own account
                if self.started_pid is not None:
                    self.freezer.pid = worker_pid(self.started_pid)
                self._take_census(list(own_roots))
                start = _clock()
                checked_ms = self._check_draws()
                phases["check_s"] = _clock() - start
                if self.once is not None:
                    self.batch = self._batch(min([self.once[0], *checked_ms]) - self.once[1])  # net of the blank
                start = _clock()
                result.paired = self._timed_rounds(solo)
                phases["timing_s"] = _clock() - start
                phases["batch"] = float(self.batch)
                self.freezer.thaw()
                self.cand.link.send(encode(Command(Order.FINISH)))
            except WorkerGone as gone:
                self.freezer.thaw()
                raise _worker_ended(self.cand, str(gone)) from gone
            except ProtocolError as exc:
                raise Decided("crash", f"the worker's answer is not the referee's protocol ({exc})") from exc
            result.report = self.cand.report()
            self._judge_census(result)
        except Decided as decided:
            result.verdict, result.reason, result.paired = decided.verdict, decided.reason, None
            result.report = decided.report
        finally:
            self.freezer.thaw()  # a stopped worker would never read the end of its link
            for census in (self.census, self.eager_census):
                if census is not None:
                    census.close()
            self._finish_reference()
            for link in (self.ref.link, self.cand.link):
                link.close()
        result.calls_judged, result.tolerance = self.judged, self.tolerance
        for who, worker in (("reference", self.ref), ("candidate", self.cand)):
            phases.update({f"{who}_{order}_s": s for order, s in worker.seconds.items()})
        return result

    def _take_census(self, own_roots: list[Path]) -> None:
        try:
            if self.started_pid is None:
                raise CensusUnavailable("the sandbox did not say which process is the worker")
            self.census = Census(worker_pid(self.started_pid), own_roots)
        except OSError as exc:  # CensusUnavailable, or the worker gone meanwhile
            self.census_skipped = str(exc)
            return
        if not isinstance(self.hands, HostHands):
            return  # on a device no counted bracket carries the events (_candidate_call)
        try:
            if self.reference_pid is None:
                raise CensusUnavailable("the sandbox did not say which process is the reference's worker")
            self.eager_census = Census(worker_pid(self.reference_pid), [])
        except OSError as exc:
            # The candidate's census stays: it is the torch_ops rule's evidence, which its worker cannot
            # reach. Its calls are then timed under events eager's are not: its speedup errs low, never
            # high, and the record says so.
            self.eager_unobserved = f"eager's brackets ran without the census's perf events ({exc})"

    def _judge_census(self, result: Refereed) -> None:
        result.eager_unobserved = self.eager_unobserved
        if self.census is None:
            result.census_skipped = self.census_skipped
            return
        shares, samples = self.census.shares(), sum(self.census.counts.values())
        result.census = {**shares, "samples": float(samples)}
        if self.eager_census is not None:  # eager's brackets under the same events (diagnosis: how many)
            result.census["eager_samples"] = float(sum(self.eager_census.counts.values()))
        computing = sum(n for where, n in self.census.counts.items() if where in COMPUTE)
        share = self.census.counts["pytorch"] / computing if computing else 0.0
        # On a device the host's samples are launches, not the computation: there they are diagnosis.
        forbid = (self.settings.torch_ops or "forbid") == "forbid" and isinstance(self.hands, HostHands)
        if forbid and computing >= _CENSUS_SAMPLES and share >= PYTORCH_SHARE:
            seen = (
                f"{share:.0%} of forward's computing time ran in PyTorch's compute library (libtorch_cpu), "
                f"{self.census.counts['own'] / computing:.0%} in the candidate's own library ({computing} samples "
                "taken by perf events from outside the worker)"
            )
            report = result.report
            if report is not None and report.verdict == "rejected":  # the worker's own checks name the ops
                raise Decided("rejected", f"{report.reason}; and {seen}", report)
            rule = "the computation must be the candidate's own kernels (evaluate.torch_ops=forbid)"
            raise Decided("rejected", f"{seen}: {rule}", report)

    def _reference_answer(self, command: Command | None) -> Answer:
        try:
            return self.ref.ask(command)
        except (WorkerGone, ProtocolError) as exc:
            report = self.ref.report() if isinstance(exc, WorkerGone) else None
            why = report.reason if report is not None and report.reason else str(exc)
            raise ForgeBenchError(f"the reference session failed ({shorten(why, 500)})") from exc

    def _finish_reference(self) -> None:
        try:
            self.ref.link.send(encode(Command(Order.FINISH)))
        except OSError:
            pass
        report = self.ref.report()
        if report.verdict != "correct":
            raise ForgeBenchError(f"the reference session failed ({shorten(report.reason, 500)})")

    def _draw(self, scale: float = 1.0, calls: int = 1) -> Answer:
        return self._reference_answer(Command(Order.DRAW, seed=secret_seed(), scale=scale, calls=calls))

    def _eager_call(self, scalars: list, calls: int = 1) -> float:
        return self._reference_timed(Command(Order.CALL, scalars=scalars, calls=calls), calls)

    def _blank(self, calls: int = 1) -> float:
        return self._reference_timed(Command(Order.BLANK, calls=calls), calls)

    def _reference_timed(self, command: Command, calls: int) -> float:
        """Eager's calls or the blank's, ms a call, bracketed as the candidate's are."""
        command.key = self.hands.before("working", calls)
        if self.eager_census is not None:
            self.eager_census.start()
        start = _clock()
        self.hands.within("working", calls)
        self._reference_answer(command)
        ms = (_clock() - start) * 1e3 / calls
        if self.eager_census is not None:
            self.eager_census.stop()
        return ms

    def _candidate_call(self, scalars: list, calls: int = 1, warm_up: bool = False) -> float:
        """The candidate's calls on the pristine inputs, timed from before the inputs reach it (on a
        device: before it has the key that unmasks them) to its answer; its outputs taken out of its
        reach before anything else, its inputs compared.

        warm_up: a timed round not counted. On a device the census (diagnosis there: a GPU's work is not
        the host's time) samples only those: perf events on every thread of the worker slow its wake-ups
        (a 0.065 ms kernel's check draws read 2-3x slower on the H200), and the check draws size the
        batch (docs/results.md)."""
        self.freezer.thaw()  # woken before the staging, not just before the bracket: settled when it starts
        key = self.hands.before("candidate", calls)
        if key:  # its context the device's current one, so the bracket holds no switch between processes
            self.cand.ask(Command(Order.PREPARE))
        sampled = self.census is not None and (isinstance(self.hands, HostHands) or warm_up)
        if sampled:
            self.census.start()
        start = _clock()
        self.hands.within("candidate", calls)
        answer = self.cand.ask(Command(Order.CALL, scalars=scalars, calls=calls, key=key))
        ms = (_clock() - start) * 1e3 / calls
        changed = self.hands.take(calls)
        if sampled:
            self.census.stop()
        self.freezer.freeze()  # until its next call: nothing of it runs beside eager's or the blank's
        if not answer.ok:
            verdict = answer.verdict if answer.verdict in VERDICTS and answer.verdict != "correct" else "crash"
            raise Decided(verdict, answer.reason or "the worker reported a failed call")
        if changed is not None:
            raise Decided("rejected", changed)
        return ms

    def _solo_eager(self) -> tuple[int, list[float]]:
        """On a device, before any of the candidate's code runs: the batch (calls a bracket runs, for
        BATCH_MS of eager's work) and eager's times per call alone. Work a candidate leaves queued
        on the device can slow eager's calls beside it, never these (timing.paired's first_alone).
        The worker sets up meanwhile; the counted rounds wait for it to say it has."""
        drawn = self._draw()
        times = [(self._eager_call(drawn.scalars), self._blank()) for _ in range(2)]
        self.once = min(e for e, _ in times), min(b for _, b in times)
        batch = self._batch(self.once[0] - self.once[1])
        # Each time as the rounds' are taken (bracket included), netted with theirs by timing.paired:
        # a time less its own blank went negative on the H200 when a blank's handshake ran slow, and
        # the clamped remainder made eager "alone" 1e-6 ms, a speedup of 2e-5x.
        alone = []
        for i in range(WARMUP_ROUNDS + SOLO_ROUNDS):
            if i == WARMUP_ROUNDS:  # the candidate's worker set up: its device work is not beside these
                self.cand.ask(None)
            drawn = self._draw(calls=batch)
            ms = self._eager_call(drawn.scalars, batch)
            if i >= WARMUP_ROUNDS:
                alone.append(ms)
        return batch, alone

    def _batch(self, once_ms: float) -> int:
        """Calls a bracket runs on a device: BATCH_MS of work at once_ms a call, within the slots."""
        return max(1, min(self.layout.slots, math.ceil(BATCH_MS / max(once_ms, 0.002))))

    def _judge(self, where: str, full: bool = True, calls: int = 1) -> None:
        slot = int.from_bytes(os.urandom(2), "little") % calls
        command = Command(Order.JUDGE, slot=slot) if full else Command(Order.AGREE, calls=calls)
        answer = self._reference_answer(command)
        self.judged += 1 if full else calls
        if full:
            self.tolerance = self.tolerance or dict(answer.tolerance)
        if not answer.ok:
            raise Decided("incorrect", f"{answer.reason} (on {where})")

    def _check_draws(self) -> list[float]:
        """Calls on secret draws at the task's scale and at extreme scales, judged before any timing;
        their times (ms, bracket included), which on a device size the timed rounds' batch."""
        draws, times = [1.0] + list(EXTREME_SCALES), []
        for i, scale in enumerate(draws):
            drawn = self._draw(scale)
            if not drawn.ok:  # eager itself overflows at this scale: not a valid draw for the task
                continue
            times.append(self._candidate_call(drawn.scalars))
            where = f"check draw {i + 1}" if scale == 1.0 else f"an extreme draw (floating inputs x{scale:g})"
            self._judge(f"{where}, inputs from a secret seed")
        return times

    def _timed_rounds(self, alone: list[float] | None) -> timing.Paired:
        s, k = self.settings, self.batch
        eager, candidate, blank = [], [], []
        counted, rounds, started = 0.0, 0, _clock()
        while True:
            drawn = self._draw(calls=k)
            warm_up = rounds < WARMUP_ROUNDS
            if rounds % 2 == 0:
                e_ms, c_ms = self._eager_call(drawn.scalars, k), self._candidate_call(drawn.scalars, k, warm_up)
            else:
                c_ms, e_ms = self._candidate_call(drawn.scalars, k, warm_up), self._eager_call(drawn.scalars, k)
            b_ms = self._blank(k)
            where = f"timed call {rounds * k + 1}, inputs from a secret seed"
            self._judge(where, full=False, calls=k)
            if int.from_bytes(os.urandom(2), "little") < JUDGED_SHARE * 65536:
                self._judge(where, calls=k)
            rounds += 1
            if rounds > WARMUP_ROUNDS:
                eager.append(e_ms)
                candidate.append(c_ms)
                blank.append(b_ms)
                counted += c_ms * k
            n = len(candidate)
            enough = n >= _MIN_ROUNDS and counted >= s.budget_ms
            if enough or n >= _MAX_ROUNDS or (n >= _MIN_ROUNDS and _clock() - started > _WALL_CAP_S):
                return timing.paired(eager, candidate, blank, first_alone=alone)


_MIN_ROUNDS, _MAX_ROUNDS = 5, 1000
