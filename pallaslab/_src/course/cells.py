"""Naming the student's source lines: "Cell [5] line 3" in a notebook, "file.py line 3" else."""

from __future__ import annotations

from pallaslab._src.base import sources


def name_source(filename: str) -> str | None:
    """How messages name `filename`; None for library files (skipped in messages)."""
    # The running shell's cell numbers come through base.sources (registered by the
    # top-level package), as for every other location pallaslab shows.
    return sources.message_name(filename)
