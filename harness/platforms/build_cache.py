"""Content-addressed build cache: a source built once is loaded, not rebuilt, ever after."""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


class CompileError(RuntimeError):
    """A compiler (g++, NVRTC) rejected the candidate's source; the message is its output."""


# Every build in this process, so the worker can report whether the candidate's build was cached.
BUILDS: list[Build] = []


@dataclass(frozen=True)
class Build:
    key: str
    artifact: Path
    cached: bool


def cache_root() -> Path:
    default = Path.home() / ".cache" / "forgebench" / "build"
    return Path(os.environ.get("FORGEBENCH_BUILD_CACHE", default))


def content_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def cached_build(key: str, filename: str, build) -> Build:
    """The artifact for key, calling build(tmpdir) -> path only when it is not in the cache."""
    folder = cache_root() / key
    artifact = folder / filename
    cached = artifact.is_file()
    if not cached:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            built = build(Path(tmp))
            os.replace(built, artifact)  # atomic: a concurrent reader sees nothing or the whole file
    record = Build(key, artifact, cached)
    BUILDS.append(record)
    return record
