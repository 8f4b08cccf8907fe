"""Plants a forged record: once the checked calls are done it writes the worker's outputs file (the real
outputs it computed, with the harness's own writer) and result.json itself, claiming 1 µs, and exits
(appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (ModelNew comes from rmsnorm_cpp.py, which this is appended to)

import json
import os
from pathlib import Path

from harness.evaluate import outputs

CHECKED_CALLS = 3  # one per check seed; the worker saves their outputs before it calls forward again


class ModelNew(ModelNew):
    def forward(self, x):
        self.outputs = getattr(self, "outputs", [])
        if len(self.outputs) == CHECKED_CALLS:
            request = json.loads(Path("request.json").read_text())
            outputs.write(Path(request["outputs_path"]), [[o] for o in self.outputs + self.outputs[:1]])
            timed = {"median_ms": 0.001, "p20_ms": 0.001, "p80_ms": 0.001, "runs": 5}
            record = {"verdict": "correct", "timing": timed, "baselines": {"eager": 50.0}}
            Path(request["result_path"]).write_text(json.dumps(record))
            os._exit(0)
        self.outputs.append(super().forward(x).clone())
        return self.outputs[-1]
