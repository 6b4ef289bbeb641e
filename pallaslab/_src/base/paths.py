"""Where pallaslab keeps files between sessions."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where pallaslab keeps its caches.

    `$PALLASLAB_CACHE_DIR`, else `$XDG_CACHE_HOME/pallaslab`, else `~/.cache/pallaslab`.
    """
    if explicit := os.environ.get("PALLASLAB_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pallaslab"
