"""torch/extension.h precompiled by the harness for candidates' C++ builds: used by a build given its
folder, and never offered where anyone but the harness's user could have written it."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.evaluate import precompiled
from harness.evaluate.precompiled import PrecompiledHeader


@pytest.mark.slow
def test_a_build_of_main_cpp_with_torchs_flags_uses_the_precompiled_header(tmp_path):
    folder = PrecompiledHeader(True).folder()  # the machine's: built once, by whichever run needs it first
    assert folder is not None
    compiler, flags, _ = precompiled.main_cpp_flags()
    main = tmp_path / "main.cpp"
    main.write_text("#include <torch/extension.h>\nint twice(int x) { return 2 * x; }\n")
    for extra in ([], ["-O3"]):  # the flags torch gives main.cpp, as KernelBench's solutions add to them
        # -fsyntax-only: GCC takes or refuses the .gch while it reads the source, before any code is
        # made (the same check for a -c build); with it the probe is 11 s, not 16-23 s, a variant.
        built = subprocess.run(
            [compiler, "-H", "-DTORCH_EXTENSION_NAME=probe", *flags, *extra, "-fsyntax-only", str(main)],
            env={**os.environ, "CPATH": str(folder)},
            capture_output=True,
            text=True,
        )
        assert built.returncode == 0, built.stderr[-2000:]
        # GCC's -H marks the precompiled header it used with '!' (and one it found invalid with 'x').
        assert f"! {folder}/torch/extension.h.gch/" in built.stderr, (extra, built.stderr[:2000])


def _made(root):
    """A machine folder as make() leaves it, without compiling (the tests below judge its permissions)."""
    root.mkdir(mode=0o755)
    folder = root / precompiled.key(*precompiled.main_cpp_flags())
    variants = folder / "torch" / "extension.h.gch"
    variants.mkdir(parents=True)
    (variants / "default.gch").write_bytes(b"gch")
    (folder / "torch" / "extension.h").write_text(precompiled.WRAPPER)
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def test_a_precompiled_header_anyone_else_could_write_is_not_offered_and_the_reason_is_said(tmp_path):
    folder = _made(tmp_path / "pch")
    header = PrecompiledHeader(True, root=tmp_path / "pch")
    assert header.folder() == folder
    (folder / "torch" / "extension.h.gch" / "default.gch").chmod(0o666)  # its code anyone's now
    assert header.folder() is None
    assert "no longer this user's alone" in header.failed
    assert header.folder() is None  # and not offered again by this process


def test_a_machine_folder_planted_by_another_user_is_refused(tmp_path):
    if os.getuid() != 0:
        pytest.skip("making a folder another user's needs root")
    _made(tmp_path / "pch")
    os.chown(tmp_path / "pch", 65534, 65534)  # nobody's: what a candidate could have made in /tmp first
    header = PrecompiledHeader(True, root=tmp_path / "pch")
    assert header.folder() is None
    assert "not this user's alone" in header.failed


def test_off_means_no_folder_and_nothing_made(tmp_path):
    header = PrecompiledHeader(False, root=tmp_path / "pch")
    assert header.folder() is None and not (tmp_path / "pch").exists()


def test_only_a_candidate_whose_source_may_parse_torchs_header_gets_it_and_waits_for_it(tmp_path):
    plain, inline = tmp_path / "plain.py", tmp_path / "inline.py"
    plain.write_text("from harness.platforms.cpu import compile_cpp\n")  # the cpu platform's own g++ build
    inline.write_text("from torch.utils.cpp_extension import load_inline\n")
    header = PrecompiledHeader(True, root=tmp_path / "pch")
    assert header.for_candidate(plain) is None and not (tmp_path / "pch").exists()  # nothing made for it
    folder = _made(tmp_path / "pch")
    assert header.for_candidate(inline) == folder
