"""Naming the student's source lines: "Cell [5] line 3" in a notebook, "file.py line 3" else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pallaslab._src import sources
from pallaslab._src.core.session import is_user_source


def name_source(filename: str) -> str | None:
    """How messages name `filename`; None for library files (skipped in messages)."""
    if label := sources.cell_label(filename):
        return f"{label} line"
    number = _cell_numbers().get(filename)
    if number is not None:
        return f"Cell [{number}] line"
    return f"{Path(filename).name} line" if is_user_source(filename) else None


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
