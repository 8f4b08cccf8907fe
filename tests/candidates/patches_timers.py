"""Plants a timer patch: at import it makes time.perf_counter (and torch.cuda.Event) report no time
passing, so a harness that reads them after the candidate loads would time every call at zero
(appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch comes from rmsnorm_cpp.py, which this is appended to)

import time

time.perf_counter = lambda: 0.0
time.monotonic = lambda: 0.0
torch.cuda.Event = None
