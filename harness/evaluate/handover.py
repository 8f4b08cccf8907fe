"""A candidate's outputs handed to the judge in device memory rather than through a file.

The worker describes its kept outputs (Device.export: CUDA IPC handles) in `shared.json` in its
folder and waits; the parent (`Watch`, a thread beside the worker) has the judge open and compare
them in place, then answers in `judged`: "taken", or "write" when the handover failed, and the
worker writes outputs.bin as it would have. Either way the judge compares the same tensors.

Like outputs.bin, shared.json is the candidate's process's to forge; what is opened must lie in
allocations the driver maps (cuda_ipc.opened checks every extent), and the check seeds' outputs
are not the only check: the unseen and kept timed calls are judged in the worker.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from harness.evaluate import outputs

SHARED, JUDGED = "shared.json", "judged"
_MAX_DESCRIPTION_BYTES = 1 << 20
_POLL_S = 0.005


def offer(calls: list[list[torch.Tensor] | str], folder: Path, device) -> bool:
    """Describe the calls' outputs for the judge and wait for its answer: True when it took them,
    False when the outputs must be written to a file instead. The tensors stay alive and unchanged
    until the answer comes (the judge reads them in place)."""
    held: list[torch.Tensor] = []

    def exported(t: torch.Tensor) -> dict:
        held.append(t)
        return device.export(t)

    try:
        described = outputs.describe(calls, exported)
        device.synchronize()
        description: dict[str, Any] = {"calls": described}
    except Exception as exc:  # the driver would not export them: the file path, and the reason said
        description = {"unshared": f"{type(exc).__name__}: {exc}"}
    staged = folder / (SHARED + ".part")
    staged.write_text(json.dumps(description))
    staged.rename(folder / SHARED)  # whole or not at all, for the watcher
    answer = folder / JUDGED
    while not answer.exists():  # the parent answers in a finally; the worker's timeout bounds this
        time.sleep(_POLL_S)
    return answer.read_text() == "taken" and "unshared" not in description


class Watch(threading.Thread):
    """The parent's side: waits for the worker's description, has `judge` compare it (a dict back,
    {"unshared": why} when it could not be opened), and answers the worker."""

    def __init__(self, folder: Path, judge: Callable[[dict], dict]):
        super().__init__(daemon=True)
        self.folder, self.judge = folder, judge
        self.answer: dict | None = None
        self.unshared: str | None = None
        self._done = threading.Event()

    def run(self) -> None:
        shared = self.folder / SHARED
        while not shared.exists():
            if self._done.wait(_POLL_S):
                return
        reply = "write"
        try:
            with open(shared, "rb") as f:
                description = json.loads(f.read(_MAX_DESCRIPTION_BYTES))
            if not isinstance(description, dict) or not isinstance(description.get("calls"), list):
                self.unshared = str(description.get("unshared") if isinstance(description, dict) else description)
            else:
                answer = self.judge(description)
                if "unshared" in answer:
                    self.unshared = answer["unshared"]
                else:
                    self.answer, reply = answer, "taken"
        except Exception as exc:  # a torn description, or the judge's own failure: the file path instead
            self.unshared = f"{type(exc).__name__}: {exc}"
        finally:
            (self.folder / JUDGED).write_text(reply)

    def stop(self) -> None:
        """After the worker has ended: stop waiting for a description it will not write."""
        self._done.set()
        self.join()
