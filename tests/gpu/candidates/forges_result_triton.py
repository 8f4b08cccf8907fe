"""Plants a forged record on a GPU: after the checked calls it writes the worker's outputs (the real
ones, with the harness's own writer) and a result.json claiming 1 µs and a slow eager baseline, then
exits (appended to softmax_triton.py)."""
# ruff: noqa: F821  (ModelNew comes from softmax_triton.py, which this is appended to)

import json
import os
from pathlib import Path

from harness.evaluate import outputs

CHECKED_CALLS = 3  # one per check seed


class ModelNew(ModelNew):
    def forward(self, x):
        self.kept = getattr(self, "kept", [])
        if len(self.kept) == CHECKED_CALLS:
            request = json.loads(Path("request.json").read_text())
            outputs.write(Path(request["outputs_path"]), [[o] for o in self.kept + self.kept[:1]])
            timed = {"median_ms": 0.001, "p20_ms": 0.001, "p80_ms": 0.001, "runs": 5}
            record = {"verdict": "correct", "timing": timed, "baselines": {"eager": 50.0}}
            Path(request["result_path"]).write_text(json.dumps(record))
            os._exit(0)
        self.kept.append(super().forward(x).clone())
        return self.kept[-1]
