"""What a bracket pays when two processes take turns on one GPU: the referee's candidate bracket has
the reference session stage inputs (a device copy, in its context) and then the candidate's worker
run its kernel (in another context). Times, per round trip, from one process: A) a copy here, then a
kernel in the other process; B) no GPU work here, a kernel there; C) copy and kernel both here;
D) as A, with the other process stopped (SIGSTOP) between its turns, as referee._Freezer does.

    python3 benchmarks/context_switch_probe.py   # on a GPU machine
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import statistics
import time

N, MB = 300, 4


def _worker(conn, handle) -> None:
    import torch

    from harness.devices import cuda_ipc
    from harness.evaluate.outputs import DTYPES

    with cuda_ipc.opened([handle], DTYPES) as (raw,):
        x = raw.view(torch.float32)
        conn.send("ready")
        while True:
            order = conn.recv()
            if order == "stop":
                return
            x.add_(1.0)
            torch.cuda.synchronize()
            conn.send("done")


def main() -> None:
    import torch

    from harness.devices import cuda_ipc

    src = torch.zeros(MB << 18, device="cuda")
    mine = torch.zeros(MB << 18, device="cuda")
    shared = cuda_ipc.Allocation(MB << 20)
    here, there = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=_worker, args=(there, cuda_ipc.export(shared.bytes)))
    proc.start()
    assert here.recv() == "ready"
    dst = shared.bytes.view(torch.float32)

    def round_trip(copy: bool, freeze: bool) -> float:
        if freeze:
            os.kill(proc.pid, signal.SIGCONT)
        start = time.perf_counter()
        if copy:
            dst.copy_(src)
            torch.cuda.synchronize()
        here.send("go")
        here.recv()
        ms = (time.perf_counter() - start) * 1e3
        if freeze:
            os.kill(proc.pid, signal.SIGSTOP)
        return ms

    def local() -> float:
        start = time.perf_counter()
        mine.copy_(src)
        torch.cuda.synchronize()
        mine.add_(1.0)
        torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3

    cases = {
        "A copy here, kernel there": lambda: round_trip(True, False),
        "B kernel there only": lambda: round_trip(False, False),
        "C copy and kernel here": local,
        "D as A, other stopped between turns": lambda: round_trip(True, True),
    }
    for name, case in cases.items():
        times = [case() for _ in range(N)][20:]
        times.sort()
        print(f"{name:40} median {statistics.median(times):.4f} ms, p20 {times[len(times) // 5]:.4f} ms", flush=True)
    os.kill(proc.pid, signal.SIGCONT)
    here.send("stop")
    proc.join()


if __name__ == "__main__":
    main()
