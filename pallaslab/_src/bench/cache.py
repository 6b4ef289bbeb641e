"""Tuning results on disk, so re-running a notebook does not re-measure.

One JSON file per (kernel source, input shapes and dtypes, device, JAX version),
holding one entry per config measured. The directory is `$PALLASLAB_CACHE_DIR`, else
`$XDG_CACHE_HOME/pallaslab`, else `~/.cache/pallaslab`. A damaged file is ignored
(and rewritten), never an error; so is a damaged entry in a sound file (one that is
not an object, or that the cache's `valid` check refuses): it is left out when read,
measured again, and dropped from the file at the next write.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pallaslab._src.base.paths import cache_dir


def digest(value: Any) -> str:
    """A stable short hash of a JSON-able value."""
    text = json.dumps(value, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def config_key(config: dict[str, Any]) -> str:
    """How a config is named in the cache: its values as sorted JSON."""
    return json.dumps(config, sort_keys=True, default=repr)


class TuneCache:
    """The measured configs of one kernel on one device, for one set of input shapes."""

    def __init__(
        self,
        key: dict[str, Any],
        directory: Path | None = None,
        valid: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """A cache file for `key` in `directory`.

        Args:
            key: What the results depend on (hashed into the file name, kept inside).
            directory: Where cache files live (default `cache_dir()`).
            valid: Says whether a stored entry can be used; others are ignored.
        """
        self.key = key
        self.path = (directory or cache_dir()) / "tune" / f"{digest(key)}.json"
        self.valid = valid

    def load(self) -> dict[str, dict[str, Any]]:
        """Config key -> stored row, for every sound config measured before."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("key") != json.loads(
            json.dumps(self.key, default=repr)
        ):
            return {}
        entries = data.get("configs")
        if not isinstance(entries, dict):
            return {}
        return {
            key: entry
            for key, entry in entries.items()
            if isinstance(entry, dict) and self._usable(entry)
        }

    def _usable(self, entry: dict[str, Any]) -> bool:
        if self.valid is None:
            return True
        try:
            return bool(self.valid(entry))
        except Exception:  # a check that cannot read the entry refuses it
            return False

    def store(self, entries: dict[str, dict[str, Any]]) -> None:
        """Adds (or replaces) entries, writing the file atomically."""
        merged = {**self.load(), **entries}
        payload = json.dumps({"key": self.key, "configs": merged}, indent=1, default=repr)
        with contextlib.suppress(OSError):  # a read-only home must not break tuning
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(payload)
                Path(tmp).replace(self.path)  # atomic: readers never see half a file
            finally:
                Path(tmp).unlink(missing_ok=True)

    def clear(self) -> None:
        """Forgets every config of this key."""
        with contextlib.suppress(OSError):
            self.path.unlink()
