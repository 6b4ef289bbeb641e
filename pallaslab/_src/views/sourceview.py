"""Which source lines the views show, with marks on the lines kernels come from."""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING, Literal

from pallaslab._src.base import sources, words
from pallaslab._src.views import texts, where
from pallaslab._src.views.contracts import SourceWindow

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

# Files up to this many lines are shown whole; longer ones around the kernels only.
_WHOLE_FILE_LINES = 300
# Cells are shown whole up to this many lines.
_WHOLE_CELL_LINES = 3000
_MAX_WINDOW = 600
# Characters of one window at most (it is sent in the Source, Jaxpr and IR panes): long
# lines are cut shorter until the window fits.
_WINDOW_CHARS = 192 << 10
_MAX_LINE = 1000
_MIN_LINE = 80


MarkKind = Literal["kernel", "call", "blockspec"]


@dataclasses.dataclass(frozen=True)
class Mark:
    """A note on one source line ("kernel add_kernel", "BlockSpec of x_ref")."""

    line: int
    kind: MarkKind
    text: str


@dataclasses.dataclass(frozen=True)
class SourceFile:
    """A window of one source file, for display.

    Attributes:
        file: The file name as Python knows it.
        label: Its human name ("Cell [3]", "softmax.py").
        first: Line number of `lines[0]` (1-based).
        lines: The shown lines.
        marks: Notes on lines of the window.
    """

    file: str
    label: str
    first: int
    lines: tuple[str, ...]
    marks: tuple[Mark, ...]

    def to_json(self) -> SourceWindow:
        """The view models' form."""
        return {
            "file": self.file,
            "label": self.label,
            "first": self.first,
            "lines": list(self.lines),
            "marks": [{"line": m.line, "kind": m.kind, "text": m.text} for m in self.marks],
        }


# Several tabs (and the static page) ask for the same windows of one inspection.
_recent: weakref.WeakKeyDictionary[Inspection, list[SourceFile]] = weakref.WeakKeyDictionary()


def source_files(inspection: Inspection) -> list[SourceFile]:
    """The source windows that explain an inspection, kernels' files first."""
    cached = _recent.get(inspection)
    if cached is None:
        cached = _recent[inspection] = _source_files(inspection)
    return cached


# What a mark says about the things on its line, by kind.
_MARK_WORDS = {"kernel": "kernel {}", "call": "runs {}", "blockspec": "BlockSpec of {}"}


def _merged_marks(found: dict[int, dict[MarkKind, list[str]]]) -> list[Mark]:
    """One mark per line, naming everything on it.

    A BlockSpec shared by several operands (`in_specs=[spec, spec]`, `[spec] * 2`)
    has one index map on one line: the mark names each operand, not the last.
    """
    marks = []
    for line, kinds in found.items():
        phrases = [
            _MARK_WORDS[kind].format(words.and_list(list(dict.fromkeys(subjects))))
            for kind, subjects in kinds.items()
        ]
        marks.append(Mark(line, next(iter(kinds)), " · ".join(phrases)))
    return marks


def _source_files(inspection: Inspection) -> list[SourceFile]:
    found: dict[str, dict[int, dict[MarkKind, list[str]]]] = {}
    mapped: dict[str, set[int]] = {}
    # Library files only where a kernel's body is (JAX's own ops): never a default
    # index map's or a wrapper's line inside JAX as if it were the user's.
    allowed = where.kernel_files(inspection.kernels)

    def note(file: str, line: int, kind: MarkKind, subject: str) -> None:
        found.setdefault(file, {}).setdefault(line, {}).setdefault(kind, []).append(subject)

    for kernel in inspection.kernels:
        if kernel.source:
            note(kernel.source.file, kernel.source.line, "kernel", kernel.name)
        if kernel.call_site:
            note(kernel.call_site.file, kernel.call_site.line, "call", kernel.name)
        for operand in kernel.operands:
            index_map = operand.index_map
            if index_map and index_map.source_file:
                note(index_map.source_file, index_map.source_line, "blockspec", operand.label)
        for _, file, line in kernel.jaxpr_source_map:
            mapped.setdefault(file, set()).add(line)
    for _, file, line in inspection.jaxpr_source_map:
        mapped.setdefault(file, set()).add(line)
    marks = {file: _merged_marks(lines) for file, lines in found.items()}

    files = [f for f in dict.fromkeys([*marks, *mapped]) if where.shown_file(f, allowed)]
    shown = []
    for file in files:
        window = _window(
            file,
            [m.line for m in marks.get(file, [])] + sorted(mapped.get(file, ())),
            inspection.source_lines(file),
        )
        if window is None:
            continue
        first, text = window
        last = first + len(text) - 1
        shown.append(
            SourceFile(
                file=file,
                label=sources.label(file),
                first=first,
                lines=tuple(_fit(text)),
                marks=tuple(
                    sorted(
                        (m for m in marks.get(file, []) if first <= m.line <= last),
                        key=lambda m: m.line,
                    )
                ),
            )
        )
    return shown


def _window(file: str, interesting: list[int], text: list[str]) -> tuple[int, list[str]] | None:
    """The lines of `text` (the file as traced) to show around the interesting ones."""
    if not text or not interesting:
        return None
    whole = _WHOLE_CELL_LINES if sources.cell_label(file) else _WHOLE_FILE_LINES
    if len(text) <= whole:
        return 1, text
    first, last = min(interesting), max(interesting)
    for line in interesting:
        extent = sources.function_extent(file, line, text)
        if extent is not None:
            first, last = min(first, extent.first), max(last, extent.last)
    first = max(1, first - 2)
    last = min(len(text), last + 2, first + _MAX_WINDOW - 1)
    return first, text[first - 1 : last]


def _fit(lines: list[str]) -> list[str]:
    """The lines, long ones cut (saying how much) so the window stays small."""
    limit = _MAX_LINE
    while limit > _MIN_LINE and sum(min(len(line), limit) for line in lines) > _WINDOW_CHARS:
        limit //= 2
    return [texts.clip_line(line, limit) for line in lines]
