"""The unprivileged user workers run as when the harness is root, and the folders it cannot enter."""

from __future__ import annotations

from pathlib import Path

NOBODY = 65534


def closed_to_others(folder: Path) -> Path | None:
    """The first folder at or above `folder` (those that exist) that others may not enter, if any."""
    for parent in [folder, *folder.parents]:
        if parent.exists() and not parent.stat().st_mode & 0o001:
            return parent
    return None
