"""The build caches of candidate sources, one per source content, owned by the harness.

A build is reused only by the same source, so no candidate can plant a library another will load,
or read another's sources. A cache is opened to the worker evaluating its source while it runs and
closed to every worker after (evaluator._run), and held by one worker at a time.
"""

from __future__ import annotations

import fcntl
import hashlib
import threading
from contextlib import contextmanager
from pathlib import Path

from harness.evaluate.sandbox import make_worker_folder


class SourceCaches:
    def __init__(self, cache_dir: Path):
        self.root = cache_dir / "sources"
        self._holders: dict[Path, threading.Lock] = {}
        self._holders_lock = threading.Lock()

    def of(self, candidate: Path) -> Path:
        """The build cache of the source in this file, keyed by its content."""
        make_worker_folder(self.root)  # pass-through only: a worker can neither list nor create keys here
        digest = hashlib.sha256(candidate.read_bytes() if candidate.is_file() else b"").hexdigest()[:24]
        return self.root / digest

    @contextmanager
    def held(self, cache: Path):
        """One worker at a time in a source's build cache, across this process's threads and other
        harness processes. A torch extension `lock` found on taking it is then a dead build's (its
        worker killed mid-build, or the whole harness: a regrade stopped by a machine's limit), which
        would make the next build of that source wait forever: it is removed."""
        with self._holders_lock:
            holder = self._holders.setdefault(cache, threading.Lock())
        with holder, open(cache.with_name(cache.name + ".held"), "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            for lock in (cache / "torch_extensions").glob("*/lock"):
                lock.unlink(missing_ok=True)
            yield
