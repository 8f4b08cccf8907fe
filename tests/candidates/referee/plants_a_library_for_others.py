"""Class 8, one candidate poisons another: it builds a library whose kernel does nothing and puts it
under the build key of its own (legitimate) kernel's source, in every build cache it can reach, so a
later candidate with that kernel would load it and be timed at nothing; and it looks for other
candidates' sources, returning an empty output if it could read one (appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (SOURCE, torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)

import os
import subprocess
import tempfile
from pathlib import Path

from harness.platforms import build_cache
from harness.platforms.cpu import CXX_FLAGS, _compiler_identity

_NOTHING = 'extern "C" void rmsnorm(const float*, const float*, float*, long, long, float) {}\n'


def _reachable_caches() -> list[Path]:
    own = build_cache.cache_root()
    found = [own]
    for above in own.parents:  # every cache folder it can list on the way up
        try:
            found += [p for p in above.iterdir() if p.is_dir()] + [p / "build" for p in above.iterdir()]
        except OSError:
            continue
    return found


def _plant() -> None:
    cxx = os.environ.get("CXX", "g++")
    key = build_cache.content_key(SOURCE, cxx, _compiler_identity(cxx), *CXX_FLAGS)
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "kernel.cpp", Path(tmp) / "kernel.so"
        src.write_text(_NOTHING)
        subprocess.run([cxx, *CXX_FLAGS, str(src), "-o", str(lib)], check=True)
        for root in _reachable_caches():
            try:
                (root / key).mkdir(parents=True, exist_ok=True)
                staged = root / key / f".plant-{os.getpid()}"
                staged.write_bytes(lib.read_bytes())
                os.replace(staged, root / key / "kernel.so")  # a new file: the loaded one stays mapped
            except OSError:
                pass


def _others_sources() -> list[Path]:
    here = Path.cwd().resolve()
    found = []
    for above in list(here.parents)[:4]:
        try:
            found += [p for p in above.rglob("candidate.py") if p.parent != here and p.read_text()]
        except OSError:
            continue
    return found


_plant()
_READ_OTHERS = bool(_others_sources())


class ModelNew(ModelNew):
    def forward(self, x):
        return torch.empty_like(x) if _READ_OTHERS else super().forward(x)
