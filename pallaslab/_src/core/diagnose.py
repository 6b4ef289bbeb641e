"""Turning failures into one clear message that names the source line.

A JAX error met while tracing a kernel is often sixty lines of traceback whose point
is one line of the user's cell. `diagnose` finds that line and says what went wrong
in the kernel author's terms, with a hint of what to write instead. The record is
`diagnosis.Diagnosis`, the explanations are `diagnose_matchers`, and finding the
user's line is `diagnose_lines`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from pallaslab._src.base import sources
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.diagnose_lines import innermost_user_frame, pallas_call_line
from pallaslab._src.core.diagnose_matchers import MATCHERS
from pallaslab._src.core.diagnosis import KIND_TITLES, Diagnosis, SourceNamer
from pallaslab._src.records import SourceLocation

__all__ = ["KIND_TITLES", "Diagnosis", "SourceNamer", "diagnose", "pallas_call_line"]


def diagnose(
    error: BaseException,
    name_source: SourceNamer,
    namespace: Iterable[str] = (),
    fallback: SourceLocation | None = None,
) -> Diagnosis:
    """Explains `error`, pointing at the user's source line.

    Args:
        error: The exception raised while running or tracing the user's code.
        name_source: Names the user's files; frames in other files are skipped.
        namespace: Names defined in the user's namespace, for "did you mean" hints.
        fallback: Where to point when the error has no line of its own (e.g. the
            magic line for an error while tracing the call it names).
    """
    # An error met while lowering or running a traced program points at the line
    # that made the failing operation (JAX keeps that stack); else at the innermost
    # line of the user's in the traceback.
    frame_location = innermost_user_frame(
        jax_adapter.op_traceback(error), name_source
    ) or innermost_user_frame(error.__traceback__, name_source)
    for matcher in MATCHERS:
        try:
            found = matcher(error, namespace)
        except Exception:  # a matcher must never hide the error it explains
            continue
        if found is None:
            continue
        location = found.location or frame_location or fallback
        label = name_source(location.file) if location else None
        if location is not None and label is None:
            # The line JAX named is not the user's (e.g. a library kernel); point at
            # the user's innermost frame instead, if there is one.
            location = frame_location or fallback
            label = name_source(location.file) if location else None
        return dataclasses.replace(
            found,
            summary=_rename_files(found.summary, name_source),
            hint=_rename_files(found.hint, name_source),
            location=location,
            label=label or "",
            error_type=type(error).__name__,
        )
    raise AssertionError("the generic matcher always matches")  # pragma: no cover


# Cell file names as IPython and ipykernel make them, with an optional `:LINE`.
_CELL_FILE = re.compile(
    r"(?P<file><ipython-input-[^>\s]*>|/[^\s:'\"]*ipykernel_\d+/\d+\.py)(?::(?P<line>\d+))?"
)


def _rename_files(text: str, name_source: SourceNamer) -> str:
    """Cell file names (`<ipython-input-3-...>:9`) in a message as the user sees them."""
    if not text:
        return text

    def named(match: re.Match[str]) -> str:
        label = name_source(match["file"]) or sources.cell_label(match["file"])
        if label and not label.endswith(" line"):
            label += " line"
        label = label or "a cell's line"
        return f"{label} {match['line']}" if match["line"] else label.removesuffix(" line")

    return _CELL_FILE.sub(named, text)
