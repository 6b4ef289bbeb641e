"""Source text and human names for the files kernels come from.

Notebook cells are compiled under temporary file names; the magic registers each
cell it runs here ("Cell [4]"), so messages and views can say "Cell line 7" and show
the cell's text. Other files are read with `linecache`.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import linecache
import sys
from pathlib import Path

_cell_labels: dict[str, str] = {}


def register_cell(filename: str, label: str, text: str) -> None:
    """Records that `filename` holds a notebook cell's code, shown as `label`."""
    _cell_labels[filename] = label
    lines = text.splitlines(keepends=True)
    linecache.cache[filename] = (len(text), None, lines, filename)


def cell_label(filename: str) -> str | None:
    """The label of a registered cell ("Cell [4]"), or None for other files."""
    return _cell_labels.get(filename)


def label(filename: str) -> str:
    """A short human name: the cell label, else the file's base name."""
    return _cell_labels.get(filename) or Path(filename).name or filename


def lines(filename: str) -> list[str]:
    """The file's lines without line ends ([] when the source is unavailable)."""
    return [line.rstrip("\r\n") for line in linecache.getlines(filename)]


_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


# Packages whose frames are never the user's, wherever they are installed from (a
# source checkout on PYTHONPATH, an editable install, Debian's dist-packages).
_LIBRARY_PACKAGES = ("jax", "jaxlib")


def is_library_file(filename: str) -> bool:
    """Whether the file belongs to pallaslab, an installed package or Python itself."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return (
        "site-packages" in filename
        or "dist-packages" in filename
        or filename.startswith(_PACKAGE_DIR)
        or any(filename.startswith(str(Path(p) / "lib")) for p in prefixes)
        or any(filename.startswith(d) for d in _library_dirs())
    )


def _library_dirs() -> list[str]:
    found = []
    for name in _LIBRARY_PACKAGES:
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            found.append(str(Path(file).parent) + "/")
    return found


@dataclasses.dataclass(frozen=True)
class Extent:
    """Lines `first`..`last` (1-based, inclusive) of a file."""

    first: int
    last: int


def function_extent(filename: str, def_line: int) -> Extent | None:
    """The lines of the function (or lambda) defined at `def_line` in a file.

    This reads the file's Python structure only to find where a function ends, so
    the Source view can show it whole; kernels themselves are understood by tracing.
    """
    best: Extent | None = None
    for start, def_at, end in _function_spans("\n".join(lines(filename))):
        if start <= def_line <= def_at and (best is None or end - start < best.last - best.first):
            best = Extent(start, end)
    return best


@functools.lru_cache(maxsize=32)
def _function_spans(text: str) -> tuple[tuple[int, int, int], ...]:
    """(first line incl. decorators, def line, last line) of every function in `text`."""
    if not text:
        return ()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ()
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            if node.end_lineno is not None:
                spans.append((first, node.lineno, node.end_lineno))
    return tuple(spans)
