"""The execution modes beyond eager (docs/e2e-modes.md): the model under one CUDA graph, under
torch.compile, and under torch.compile with CUDA graphs, each weighed by the guard with the kernels
in place against the same mode without them. A kernel kept in eager may go in another mode, and the
other way round. A mode this device cannot run, or one the model or a kernel breaks (a sync or an
allocation the capture forbids), is refused with its reason, per kernel where it can be told."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch

from harness.errors import ForgeBenchError, first_line
from harness.integrate import guard
from harness.integrate.e2e_record import Decision, GuardDecision, Mode, ModeResult
from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.traced import Traced

GRAPHED = (Mode.CUDA_GRAPH, Mode.COMPILE_CUDA_GRAPH)
COMPILED = (Mode.COMPILE, Mode.COMPILE_CUDA_GRAPH)
# Forwards run on a side stream before a capture: lazy initialisation (cuBLAS handles, autotuning,
# Triton's first launch) must happen outside it.
WARMUP_CALLS = 3


def graph_capture(adapter) -> bool:
    """Whether this machine captures CUDA graphs: the device says it can, and torch has its GPU."""
    return adapter.graph_capture and adapter.available() is None


def unavailable(mode: Mode, adapter) -> str | None:
    """Why this device cannot run the mode, in one sentence; None when it can."""
    if mode in GRAPHED and not graph_capture(adapter):
        return f"{mode.value} needs CUDA graphs, and the {adapter.name} device cannot capture them"
    return None


def supported(adapter) -> list[Mode]:
    return [m for m in Mode if unavailable(m, adapter) is None]


def parse(text: str) -> list[Mode]:
    """--modes eager,cuda_graph,... as Modes; ForgeBenchError naming an unknown one."""
    known = [m.value for m in Mode]
    modes = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name not in known:
            raise ForgeBenchError(f"--modes {text}: '{name}' is no mode; give some of {', '.join(known)}.")
        modes.append(Mode(name))
    if not modes:
        raise ForgeBenchError(f"--modes {text!r}: name at least one of {', '.join(known)}.")
    return modes


def graphed(fn: Callable[[], object]) -> Callable[[], object]:
    """fn (a forward of static inputs) captured once into a CUDA graph after warm-up on a side
    stream; calling the result replays it, with no Python per op. Its outputs are the capture's
    static tensors, overwritten by each replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(WARMUP_CALLS):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay():
        graph.replay()
        return out

    return replay


class Replayed:
    """A model installed under a CUDA graph (bundle.apply with mode cuda_graph): the first call
    captures the forward on its inputs, which become the graph's static inputs; each later call
    copies its tensors into them and replays. Its outputs are overwritten by the next call."""

    def __init__(self, run: Callable):
        self.run, self.replay, self.static = run, None, None

    def __call__(self, *args, **kwargs):
        if self.replay is None:
            self.static = (args, kwargs)
            self.replay = graphed(lambda: self.run(*args, **kwargs))
        else:
            given = [*args, *kwargs.values()]
            held = [*self.static[0], *self.static[1].values()]
            for mine, theirs in zip(held, given):
                if isinstance(mine, torch.Tensor):
                    mine.copy_(theirs)
        return self.replay()


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(str(exc))}"[:300]


@dataclass
class Runners:
    """The model in one mode: as it is (`base`) and with a kept set in place (`patched`)."""

    mode: Mode
    model: torch.nn.Module
    traced: Traced
    calling: Callable
    candidates: list[Kernel]
    _pass: tuple | None = None  # CUDA graph mode: one pass over the trace, kernels switched off in it

    def base(self) -> Callable:
        if self.mode is Mode.CUDA_GRAPH:
            return graphed(self.calling(self.model))
        compile_mode = "reduce-overhead" if self.mode is Mode.COMPILE_CUDA_GRAPH else None
        return self.calling(torch.compile(self.model, mode=compile_mode))

    def patched(self, kernels: list[Kernel]) -> tuple[Callable, Patch, object, dict]:
        """The patched forward, the pass it runs, its first output and the calls each kernel took."""
        ids = {k.task_id for k in kernels}
        if self.mode is Mode.CUDA_GRAPH:
            if self._pass is None:
                patch = Patch(self.candidates)
                self._pass = (patch, self.calling(self.traced.using(patch)))
            patch, run = self._pass
            patch.off, patch.hits = {k.task_id for k in self.candidates} - ids, Counter()
            out, hits = run(), dict(patch.hits)
            return graphed(run), patch, out, hits
        patch = Patch(kernels)
        run = self.calling(patch.compile(self.model, inductor=True, cudagraphs=self.mode in GRAPHED))
        out = run()
        return run, patch, out, dict(patch.hits)


class ModeWeighing:
    """guard.settle in one mode, from the kernels confirmed in place: each kept set timed beside the
    mode without kernels and beside eager (timing.measure_together)."""

    def __init__(self, runners: Runners, eager: Callable, together: Callable, agreement: Callable, phase: Callable):
        self.runners, self.eager, self.together, self.agreement, self.phase = runners, eager, together, agreement, phase
        self.last: dict = {}

    def weigh(self, decisions: list[Decision]) -> ModeResult:
        mode = self.runners.mode
        result = ModeResult(mode)
        try:
            base = self.runners.base()
        except Exception as exc:  # the model alone breaks the mode here: no kernel is to blame
            result.refused = f"the model does not run under {mode.value} here ({_said(exc)})"
            return result
        weighed = {d.task_id: d for d in copy.deepcopy(decisions)}
        kernels = self._composing(self.runners.candidates, weighed)

        def patched(kept: list[Kernel]) -> dict[str, guard.Run]:
            self.phase(f"timing {mode.value} with {len(kept)} kept kernels in place")
            run, patch, out, hits = self.runners.patched(kept)
            timed = self.together({"eager": self.eager, "base": base, "patched": run})
            self.last = {"timings": timed, "out": out, "hits": hits}
            return {"model": guard.Run(patch, out, hits, timed["patched"], timed["base"])}

        try:
            kept, _ = guard.settle(kernels, list(weighed.values()), patched, lambda ks: ks, baseline=mode.value)
        except Exception as exc:  # out of memory with every variant alive, say: said, and eager stands
            result.refused = f"{mode.value} failed while timing ({_said(exc)})"
            return result
        hits = {k: n for k, n in self.last["hits"].items() if n}
        result.kept = [k.task_id for k in kept if hits.get(k.task_id)]
        result.decisions = {t: d.decision for t, d in weighed.items()}
        result.reasons = {t: d.reason for t, d in weighed.items() if d.reason}
        result.timings, result.hits_per_forward = self.last["timings"], hits
        if not result.kept:  # nothing goes in: the mode as it is
            result.timings = {**result.timings, "patched": result.timings["base"]}
        result.versus_base = guard.versus(result.timings["patched"], result.timings["base"])
        return result

    def _composing(self, kernels: list[Kernel], weighed: dict[str, Decision]) -> list[Kernel]:
        """The kernels that run in the mode: where the set together fails (a capture broken by a
        kernel that syncs or allocates), each is tried alone, and those that fail alone are refused
        with their reason; where all pass alone and fail together, all are."""
        if not kernels:
            return []
        try:
            self.runners.patched(kernels)
            return kernels
        except Exception as together:
            failing = {}
            for kernel in kernels:
                try:
                    self.runners.patched([kernel])
                except Exception as exc:
                    failing[kernel.task_id] = exc
            if not failing:
                failing = {k.task_id: together for k in kernels}
        for task_id, exc in failing.items():
            weighed[task_id].decision = GuardDecision.REFUSED_IN_MODE
            weighed[task_id].reason = f"under {self.runners.mode.value} it fails: {_said(exc)}"
        return [k for k in kernels if k.task_id not in failing]
