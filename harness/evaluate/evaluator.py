"""The Evaluator: a candidate against its task, refereed from this process (referee.py) with the
reference session and the candidate each in a sandboxed worker; the reference's baselines from a
trusted worker of their own."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import threading
import time
from contextlib import nullcontext
from pathlib import Path

from harness import devices, serial
from harness.errors import ForgeBenchError
from harness.evaluate import baselines, confine, ncu, speedups, stdlib_copy, verdict
from harness.evaluate.checks import near_constant
from harness.evaluate.expected import Expected, discard
from harness.evaluate.footprint import check_fits
from harness.evaluate.hands import secret_seed
from harness.evaluate.outputs import read as read_outputs
from harness.evaluate.precompiled import PrecompiledHeader
from harness.evaluate.referee import Refereed, Session
from harness.evaluate.report import WorkerReport
from harness.evaluate.result import EvalResult
from harness.evaluate.sandbox import (
    Confinement,
    ZygotePool,
    check_code_reachable,
    close_to_workers,
    make_worker_folder,
    prepare_workdir,
    worker_folder,
)
from harness.evaluate.settings import EvalSettings
from harness.evaluate.source_caches import SourceCaches
from harness.evaluate.verdict import shorten
from harness.platforms.base import Platform
from harness.tasks import Task

# A build worker's scheduling priority below the harness's: regrade builds on every core while it
# times (regrade/grade.py), and a timing's worker, referee and reference waking on a core a compiler
# holds read the wait as the call's time. At niceness 10 a compiler gets about a tenth of a core
# that a process at 0 wants.
BUILD_NICENESS = 10


class Evaluator:
    """Evaluates candidates for one platform; the reference runs once per task for its lifetime."""

    def __init__(self, platform: Platform, settings: EvalSettings, work_dir: Path, cache_dir: Path):
        reason = platform.unavailable_reason()
        if reason:
            raise ForgeBenchError(reason)
        self.platform, self.settings = platform, settings
        self.work_dir, self.cache_dir = Path(work_dir).resolve(), Path(cache_dir).resolve()
        if platform.drop_privileges:
            check_code_reachable()
            self.work_dir, self.cache_dir = worker_folder(self.work_dir), worker_folder(self.cache_dir)
        # Python in a folder nobody may enter (a pyenv under /root): a copy of its standard library,
        # made when the first candidate's worker starts (nothing is written before the run's checks).
        self._needs_stdlib_copy = platform.drop_privileges and stdlib_copy.needed()
        self._stdlib_copy: Path | None = None
        self._stdlib_lock = threading.Lock()
        self._sources = SourceCaches(self.cache_dir)
        self._header = PrecompiledHeader(platform.precompiled_header)
        self._references: dict[str, Expected] = {}
        self._ceilings_path = self.cache_dir / f"ceilings-{platform.device}.json"
        for name in platform.baselines:
            baselines.load(name)  # a name with no file fails here, not in every reference worker
        # A worker of this process's uid (a harness run by a normal user) must not read its start-up
        # environment (API keys) through /proc/<pid>/environ, nor ptrace it; the zygote and judge do the same.
        confine.make_undumpable()
        self._confine = platform.confine and confine.landlock_or_warn()
        self._workers = ZygotePool(platform.preload)
        self._ncu_refused = ""  # ncu's error once it has refused to profile on this machine
        self._device = devices.load(platform.device)

    def close(self) -> None:
        """Stop the worker zygotes (also done at exit, when the process ends)."""
        self._workers.close()

    def _reference_copy(self, task: Task) -> Path:
        """The task's reference where every worker may read it, whatever folder the task lies in."""
        # Keyed by content too: a run resumed after its task was edited must not time the old reference.
        copy = self.work_dir / "tasks" / f"{task.id}-{task.content_hash}" / "reference.py"
        if not copy.is_file():
            make_worker_folder(copy.parent)
            # Whole or absent: regrade's builds of one problem start together and read it at once.
            partial = copy.with_name(f".{copy.name}.{threading.get_ident()}")
            shutil.copyfile(task.reference_path, partial)
            os.replace(partial, copy)
        return copy

    def _request(self, task: Task, mode: str, folder: Path, **extra) -> Path:
        make_worker_folder(folder)
        s = self.settings
        budget = {"budget_ms": s.budget_ms, "warmup_ms": s.warmup_ms}
        request = {
            "mode": mode,
            "reference_path": str(self._reference_copy(task)),
            "device": self.platform.device,
            "init_seed": s.init_seed,
            "check_seeds": s.check_seeds,
            "timing_seeds": s.timing_seeds,
            "baseline_timing": {**budget, "gpu_lead": s.baseline_gpu_lead},
            "baselines": self.platform.baselines,
            "tolerance": task.tolerance,
            "tolerance_basis": s.tolerance,
            "torch_ops": s.torch_ops or "forbid",
            "outputs_path": str(folder / "outputs.bin"),
            "bounds_path": str(folder / "bounds.bin"),
            "result_path": str(folder / "result.json"),
            **extra,
        }
        path = folder / "request.json"
        path.write_text(json.dumps(request, indent=1))
        return path

    def _run(
        self,
        request: Path,
        folder: Path,
        timeout_s: float,
        task: Task,
        trusted: bool = False,
        pool: ZygotePool | None = None,
        started=lambda pid: None,
        nice: int = 0,
    ) -> WorkerReport:
        """Run one worker and read its report, or make one of how it ended (verdict.of_exit). A
        trusted worker (the reference and its baselines) keeps our user and has compiler caches of
        its own: Inductor and Triton caches hold code that gets executed, so a cache a candidate
        could write to would let it run code in the reference's worker."""
        cache_root = self.cache_dir / "reference" if trusted else self._sources.of(folder / "candidate.py")
        # A source's cache is held from its opening to its closing: a worker of the same source started
        # meanwhile would find it closed mid-build.
        with nullcontext() if trusted else self._sources.held(cache_root):
            exit_ = self._worker(request, folder, timeout_s, task, cache_root, trusted, pool, started, nice)
        result_path = folder / "result.json"
        if exit_.returncode != 0 or not result_path.is_file():
            ended = verdict.of_exit(exit_.returncode, timeout_s, exit_.log)
            return WorkerReport(ended.verdict, ended.reason)
        try:
            return WorkerReport.from_json(result_path.read_text(errors="replace"))
        except (OSError, ValueError) as exc:  # the candidate shares the worker's process: a forged report
            unusable = verdict.of_unusable_report(str(exc))
            return WorkerReport(unusable.verdict, unusable.reason)

    def _worker(
        self,
        request: Path,
        folder: Path,
        timeout_s: float,
        task: Task,
        cache_root: Path,
        trusted: bool,
        pool,
        started,
        nice: int = 0,
    ):
        """One worker run in its folder, with its caches opened to it and closed again after."""
        s = self.settings
        memory_gb = s.memory_gb if self.platform.limit_address_space else None
        shared_dirs = list(self.platform.cache_dirs(cache_root).values())
        env = prepare_workdir(folder, self.platform.worker_env(cache_root), shared_dirs, unprivileged=not trusted)
        reads = [self._reference_copy(task).parent]
        if self._needs_stdlib_copy and not trusted:
            with self._stdlib_lock:
                if self._stdlib_copy is None:
                    make_worker_folder(self.cache_dir)
                    self._stdlib_copy = stdlib_copy.ensure(self.cache_dir)
            env[stdlib_copy.ENV] = str(self._stdlib_copy)
            reads.append(self._stdlib_copy)
        header = None if trusted else self._header.for_candidate(folder / "candidate.py")
        if header is not None:  # searched before torch's own include folders (precompiled.py)
            env["CPATH"] = str(header)
            reads.append(header)
        confinement = Confinement.for_worker(folder, reads, shared_dirs) if self._confine else None
        drop = self.platform.drop_privileges and not trusted
        # A worker of its own PID namespace sees no other process; CUDA IPC (hands.DeviceHands) needs the
        # device's processes in one, so there it sees only its own user's.
        processes = "hidden" if self._device.shares_memory else "own_namespace"
        exit_ = (pool or self._workers).run(
            request, folder, timeout_s, memory_gb, env, drop, confinement, processes, started, nice
        )
        # What a worker wrote (outputs that pass the checks, its builds) is closed to every later worker.
        for closed in (folder, *shared_dirs):
            close_to_workers(closed)
        return exit_

    def ceilings(self) -> dict[str, float] | None:
        return json.loads(self._ceilings_path.read_text()) if self._ceilings_path.is_file() else None

    def reference(self, task: Task) -> Expected:
        """The reference's outputs and slow baselines, computed in a worker of its own; TaskTooLarge
        first when the task's inputs cannot fit this machine's memory."""
        if task.id not in self._references:
            check_fits(task, self._device.asynchronous)
            folder = self.work_dir / "reference" / task.id
            request = self._request(task, "reference", folder, measure_ceilings=self.ceilings() is None)
            report = self._run(request, folder, self.settings.reference_timeout_s, task, trusted=True)
            if report.verdict != "correct":
                raise ForgeBenchError(
                    f"task '{task.id}': its reference worker failed ({report.reason}); if the reason lies in the "
                    f"reference, fix {task.reference_path}."
                )
            if report.ceilings is not None:
                self._ceilings_path.parent.mkdir(parents=True, exist_ok=True)
                self._ceilings_path.write_text(json.dumps({**report.ceilings, "env": report.env}))
            import torch

            # Read on the host: this process never starts a device's runtime (its workers do).
            degenerate = near_constant(read_outputs(folder / "outputs.bin", torch.device("cpu")), task.tolerance)
            self._references[task.id] = Expected(folder / "outputs.bin", folder / "bounds.bin", report, degenerate)
        return self._references[task.id]

    def _candidate_folder(self, kind: str, task: Task, candidate_source: str) -> Path:
        """A new folder under work_dir/<kind>/<task>/ holding the candidate's source."""
        digest = hashlib.sha256(candidate_source.encode()).hexdigest()[:16]
        folder = self.work_dir / kind / task.id / f"{digest}-{time.time_ns()}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "candidate.py").write_text(candidate_source)
        return folder

    def release(self, task: Task) -> None:
        """Forget the task's reference and delete its expected outputs, once no candidate of it is
        left to judge: a suite of many GPU tasks would otherwise keep gigabytes on disk."""
        reference = self._references.pop(task.id, None)
        if reference is not None:
            discard(reference.outputs_path)
            discard(reference.bounds_path)

    def evaluate(self, task: Task, candidate_source: str, profile: bool = False) -> EvalResult:
        """The candidate refereed from this process (referee.py): its verdict and time decided here,
        its worker's report diagnosis that can only make the verdict worse."""
        reference = self.reference(task)
        if reference.degenerate:  # the task cannot tell a kernel from a constant: nothing is run
            return EvalResult(
                task.id, self.platform.name, "rejected", reason=reference.degenerate, **reference.fields()
            )
        folder = self._candidate_folder("candidates", task, candidate_source)
        session = self.work_dir / "sessions" / task.id / folder.name
        started = time.perf_counter()
        ref_request = self._request(task, "session_reference", session, first_seed=secret_seed())
        timeout_s = self.settings.timeout_s

        def start_candidate(layout, regions: dict, started) -> WorkerReport:
            extra = {
                "candidate_path": str(folder / "candidate.py"),
                "layout": serial.to_dict(layout),
                "regions": regions,  # on a device: the reference session's memory for its calls (CUDA IPC)
                "profile": profile,
                "profiler_failure": reference.report.profiler_failure,
            }
            request = self._request(task, "session_candidate", folder, **extra)
            return self._run(request, folder, timeout_s, task, started=started)

        # The reference session waits on the candidate, which may use all of its time limit.
        session_timeout_s = self.settings.reference_timeout_s + 2 * timeout_s
        refereed = Session(self.settings, timeout_s, unprivileged=self.platform.drop_privileges).run(
            session,
            lambda started: self._run(ref_request, session, session_timeout_s, task, trusted=True, started=started),
            folder,
            start_candidate,
            own_roots=[self._sources.of(folder / "candidate.py")],
        )
        shutil.rmtree(session, ignore_errors=True)  # the reference session's inputs and outputs
        for name in ("call_inputs.bin", "call_outputs.bin"):
            discard(folder / name)
        result = self._refereed_result(task, reference, refereed)
        if profile and result.correct and self._device.supports_ncu and self.settings.ncu:
            start = time.perf_counter()
            result.profile["ncu"] = self._ncu_profile(task, candidate_source, folder.with_name(folder.name + "-ncu"))
            result.phases["ncu_s"] = time.perf_counter() - start
        result.phases["wall_s"] = time.perf_counter() - started
        return result

    def _refereed_result(self, task: Task, reference: Expected, refereed: Refereed) -> EvalResult:
        report = refereed.report or WorkerReport("crash")
        verdict_, reason = refereed.verdict, refereed.reason
        if verdict_ == "correct" and report.verdict != "correct":  # the worker's own checks can only reject
            verdict_, reason = report.verdict, report.reason
        self._raise_harness_fault(task, report)
        result = EvalResult(
            task.id,
            self.platform.name,
            verdict_,
            reason=reason,
            **reference.fields(),
            phases={**refereed.phases},
            env=dict(reference.report.env),  # the trusted worker's: the candidate's could be forged
            cached_build=report.cached_build,
            profile=dict(report.profile),
            torch_ops=list(report.torch_ops),
            torch_ops_rule=self.settings.torch_ops or "forbid",
            timed_by="referee",
            calls_checked=refereed.calls_judged,
            census=dict(refereed.census),
        )
        if refereed.census_skipped:
            result.checks_skipped["census"] = shorten(refereed.census_skipped, 300)
        if refereed.eager_unobserved:
            result.checks_skipped["census_of_eager"] = shorten(refereed.eager_unobserved, 300)
        if refereed.tolerance:
            result.tolerance = refereed.tolerance
        if not result.correct:
            return result
        result.checks_skipped.update({k: shorten(v, 300) for k, v in report.checks_skipped.items()})
        speedups.from_rounds(result, refereed.paired, self._device.asynchronous)
        moved = task.bytes_moved or reference.report.io_bytes
        speedups.floored(result, moved, task.flops, self.ceilings(), self.platform.max_sol_fraction)
        return result

    def _raise_harness_fault(self, task: Task, report: WorkerReport) -> None:
        if report.harness_fault and importlib.util.find_spec(report.harness_fault.split(".")[0]):
            # The module exists for the harness, so the worker's failure to import it is ours: the
            # task errors with the reason rather than the candidate taking a verdict for it.
            raise ForgeBenchError(
                f"task '{task.id}': {report.reason}; this is the harness's fault, not the candidate's."
            )

    def build(self, task: Task, candidate_source: str) -> EvalResult | None:
        """Build the candidate's kernels in a sandboxed worker, filling the build caches, without
        checking or timing it: None when it built, else the result of its failure."""
        folder = self._candidate_folder("builds", task, candidate_source)
        request = self._request(task, "build", folder, candidate_path=str(folder / "candidate.py"))
        report = self._run(request, folder, self.settings.timeout_s, task, nice=BUILD_NICENESS)
        if report.verdict == "correct":
            return None
        return EvalResult(task.id, self.platform.name, report.verdict, reason=report.reason, env=dict(report.env))

    def _ncu_profile(self, task: Task, candidate_source: str, folder: Path) -> dict:
        """The candidate's kernels under Nsight Compute, run by a worker as confined as any other
        (ncu.py): {"kernels": [...]}, or {"error": why there are none}. Advisory: it never changes a
        verdict, and no failure of it escapes.

        ncu and its zygote run as our user, as every zygote does: only the forked worker drops to
        nobody. (Starting ncu as nobody fails wherever the interpreter lives in a private folder,
        such as a pyenv under /root, and where ncu's lock file in /tmp is root's.) So ncu's
        frontend, as our user, reads what its injection library sends from the candidate's process."""
        found = ncu.find()
        if found is None:
            return {"error": "no ncu on this machine (set FORGEBENCH_NCU to its path)"}
        if self._ncu_refused:
            return {"error": f"{self._ncu_refused} (ncu refused an earlier candidate; not tried again)"}
        own = folder.parent / (folder.name + "-tool")  # ncu's report and files, apart from the worker's
        try:
            return self._run_under_ncu(task, candidate_source, folder, own, found)
        except Exception as exc:  # a torn record, a broken pipe: the profile says so, the run goes on
            return {"error": shorten(f"{type(exc).__name__}: {exc}", 300)}
        finally:
            shutil.rmtree(own, ignore_errors=True)  # the kernels are kept; no later worker reads the rest

    def _run_under_ncu(self, task: Task, candidate_source: str, folder: Path, own: Path, found: str) -> dict:
        tool_env = prepare_workdir(own, {}, [], unprivileged=False)  # HOME and TMPDIR in own, private
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "candidate.py").write_text(candidate_source)
        log = own / "ncu.csv"
        pool = ZygotePool(self.platform.preload, ncu.wrapper(found, log), tool_env)
        request = self._request(task, "ncu", folder, candidate_path=str(folder / "candidate.py"))
        try:
            ran = self._run(request, folder, min(self.settings.timeout_s, 120.0), task, pool=pool)
        finally:
            pool.close(grace_s=60.0)  # ncu writes its report when the zygote exits
        report = log.read_text(errors="replace") if log.is_file() else ""
        kernels = ncu.parse(report)
        if kernels:
            return {"kernels": kernels, "metrics": dict(ncu.METRICS)}
        reason = ran.reason.splitlines()[0][:300] if ran.verdict != "profiled" and ran.reason else ncu.failure(report)
        if ncu.refuses(report):  # no counters on this machine: it would fail the same way every time
            self._ncu_refused = reason = ncu.failure(report)
        return {"error": reason}
