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

#: A cache directory shared by the hosts of a cluster (and the notebooks using it).
SHARED_ENV = "PALLASLAB_SHARED_CACHE_DIR"


def shared_dir() -> Path | None:
    """The shared cache directory, `$PALLASLAB_SHARED_CACHE_DIR` (None when unset)."""
    found = os.environ.get(SHARED_ENV, "").strip()
    return Path(found) if found else None


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


class LayeredCache:
    """One key's cache in several directories: this machine's, then a shared one.

    Reads merge them (this machine's entries win); writes go to each, so a result
    measured anywhere lands both here and where the other hosts look.
    """

    def __init__(self, caches: list[TuneCache]) -> None:
        """Caches of the same key, the first winning on read."""
        self.caches = caches

    @property
    def path(self) -> Path:
        """The first cache's file (this machine's)."""
        return self.caches[0].path

    def load(self) -> dict[str, dict[str, Any]]:
        """Config key -> stored row, from every directory."""
        merged: dict[str, dict[str, Any]] = {}
        for cache in reversed(self.caches):
            merged.update(cache.load())
        return merged

    def store(self, entries: dict[str, dict[str, Any]]) -> None:
        """Adds (or replaces) entries in every directory."""
        for cache in self.caches:
            cache.store(entries)


def layered(
    key: dict[str, Any],
    directory: Path | None = None,
    valid: Callable[[dict[str, Any]], bool] | None = None,
    shared: Path | None = None,
) -> LayeredCache:
    """This machine's cache of `key`, and the shared directory's (`shared_dir()`) if any."""
    caches = [TuneCache(key, directory, valid)]
    other = shared or shared_dir()
    if other is not None and other != caches[0].path.parent.parent:
        caches.append(TuneCache(key, other, valid))
    return LayeredCache(caches)
