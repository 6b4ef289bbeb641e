"""Source locations as the views show them: the user's lines, never library internals.

A location in a library file (JAX's own modules, pallaslab's, an installed package)
is shown only when a kernel's body is in that file (a kernel from a library, such as
JAX's own ops, is worth reading there); anywhere else, such as a default index map
that JAX builds, the views show nothing rather than a file the user did not write.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

from pallaslab._src.base import sources
from pallaslab._src.views.contracts import FileLocation, Location

if TYPE_CHECKING:
    from pallaslab._src.records import Kernel, SourceLocation


def kernel_files(kernels: Iterable[Kernel]) -> frozenset[str]:
    """The files the kernels' bodies are in: library files the views may show."""
    return frozenset(k.source.file for k in kernels if k.source is not None)


def shown_file(file: str, allowed: Collection[str] = ()) -> bool:
    """Whether the views show lines of `file`: the user's, or a kernel body's."""
    return file in allowed or not sources.is_library_file(file)


def location(loc: SourceLocation | None, allowed: Collection[str] = ()) -> Location | None:
    """`{"label", "line"}` of a location, or None when there is none to show."""
    if loc is None or not shown_file(loc.file, allowed):
        return None
    return {"label": sources.label(loc.file), "line": loc.line}


def file_location(loc: SourceLocation | None, allowed: Collection[str] = ()) -> FileLocation | None:
    """`{"file", "label", "line"}` of a location, or None when there is none to show."""
    if loc is None or not shown_file(loc.file, allowed):
        return None
    return {"file": loc.file, "label": sources.label(loc.file), "line": loc.line}
