"""Finding the user's line of a failure: frames in the user's files, a pallas_call's line."""

from __future__ import annotations

import types
from collections.abc import Sequence

from pallaslab._src.base import sources
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.diagnosis import SourceNamer
from pallaslab._src.records import SourceLocation


def probably_user_file(file: str) -> bool:
    """Whether a file named in an error is the user's (a cell, or not a library)."""
    if sources.cell_label(file) is not None or "ipython-input" in file:
        return True
    return bool(file) and not file.startswith("<") and not sources.is_library_file(file)


def innermost_user_frame(
    traceback: types.TracebackType | None, name_source: SourceNamer
) -> SourceLocation | None:
    found = None
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if name_source(code.co_filename) is not None:
            found = SourceLocation(code.co_filename, traceback.tb_lineno, code.co_name)
        traceback = traceback.tb_next
    return found


def pallas_call_line_of(
    error: BaseException, context: jax_adapter.PallasCallContext | None, keyword: str | None
) -> SourceLocation | None:
    """The line of the user's `pallas_call(...)` JAX refused (or of one keyword in it)."""
    hints = list(context.spec_locations) if context is not None else []
    outer = innermost_user_frame(error.__traceback__, _probably_user_name)
    found = pallas_call_line(hints, keyword, [outer.file] if outer else [])
    if found is None and keyword == "out_specs" and context is not None:
        found = next((loc for loc in context.out_specs if loc is not None), None)
    return found


def pallas_call_line(
    hints: Sequence[SourceLocation], keyword: str | None = None, files: Sequence[str] = ()
) -> SourceLocation | None:
    """Where a `pallas_call(...)` was written (or its `keyword=` argument).

    JAX does not record where a pallas_call was written, but its BlockSpecs' index maps
    know their lines (`hints`): the call written around one of them is the one.
    Without such a hint, a file (of `hints` or `files`) with a single pallas_call
    names it.
    """
    for hint in hints:
        calls = sources.calls_to(hint.file, "pallas_call")
        spans = [s for s in calls if s.first <= hint.line <= s.last]
        if spans:
            span = min(spans, key=lambda s: s.last - s.first)
            line = span.keyword_line(keyword) if keyword else None
            return SourceLocation(hint.file, line or span.first)
    for file in dict.fromkeys([*(h.file for h in hints), *files]):
        calls = sources.calls_to(file, "pallas_call")
        if len(calls) == 1:
            line = calls[0].keyword_line(keyword) if keyword else None
            return SourceLocation(file, line or calls[0].first)
    return None


def _probably_user_name(file: str) -> str | None:
    return "line" if probably_user_file(file) else None
