"""What a model run is doing, on stderr as it goes (a big model's run takes minutes), and what it has
measured so far beside its result path, so a run stopped by its timeout still tells."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


class Phases:
    def __init__(self, result_path: str):
        self.partial, self.started = Path(result_path).with_suffix(".partial.json"), time.monotonic()
        self.seen: list[str] = []  # each phase with the second it began: where a stopped run's time went
        self.partial.unlink(missing_ok=True)  # an earlier run's, in the same folder

    def __call__(self, what: str, found: dict | None = None) -> None:
        self.seen.append(f"+{time.monotonic() - self.started:.0f} s {what}")
        print(f"[e2e] {self.seen[-1]}", file=sys.stderr, flush=True)
        if found is not None:  # written whole or not at all: a kill mid-write leaves the last one
            written = self.partial.with_suffix(".tmp")
            written.write_text(json.dumps({**found, "reached": what, "phases": self.seen}, indent=1, default=str))
            os.replace(written, self.partial)
