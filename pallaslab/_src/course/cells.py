"""Naming the student's source lines: "Cell [5] line 3" in a notebook, "file.py line 3" else."""

from __future__ import annotations

from typing import Any

from pallaslab._src.base import sources


def name_source(filename: str) -> str | None:
    """How messages name `filename`; None for library files (skipped in messages)."""
    return sources.message_name(filename, _cell_numbers())


def _cell_numbers() -> dict[str, Any]:
    # IPython compiles each cell under a file name of its own and remembers the
    # execution count it ran as; outside IPython there are no cells.
    try:
        from IPython import get_ipython  # noqa: PLC0415
    except ImportError:
        return {}
    shell = get_ipython()
    compiler = getattr(shell, "compile", None)
    found = getattr(compiler, "_filename_map", None)
    return found if isinstance(found, dict) else {}
