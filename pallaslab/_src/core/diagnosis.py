"""A failure, explained: the `Diagnosis` record and its kinds in words."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pallaslab._src.base import messages
from pallaslab._src.records import SourceLocation

# Maps a file name to how messages name it ("Cell line", "Cell [3] line"); None for
# files that are not the user's (they are skipped when looking for the line).
SourceNamer = Callable[[str], str | None]


# Characters of a summary line: the message's line limit less room for the location.
_SUMMARY_LINE = messages.MAX_LINE_CHARS - 40


# Each kind of diagnosis in words: kinds are identifiers for tests and styling, never
# shown to users.
KIND_TITLES = {
    "syntax": "a syntax error",
    "undefined-name": "an undefined name",
    "traced-if": "a Python 'if' on a value known only when the kernel runs",
    "traced-int": "a Python int asked of a value known only when the kernel runs",
    "traced-value": "a value known only when the kernel runs, needed while tracing",
    "index-map-results": "an index map returning the wrong number of block indices",
    "index-map-type": "an index map returning something other than integers",
    "index-map-arity": "an index map taking the wrong number of arguments",
    "block-shape": "a block shape that does not fit its array",
    "blockspec-order": "a BlockSpec with its arguments in the old order",
    "spec-structure": "BlockSpecs that do not match the arguments",
    "kernel-returns": "a kernel that returns a value",
    "kernel-arity": "a kernel that does not take the refs passed to it",
    "kernel-not-callable": "a pallas_call given something other than a function",
    "store-shape": "a store of the wrong shape",
    "grid": "a grid that cannot run",
    "grid-too-large": "a grid too large to run",
    "run-budget": "a kernel stopped by the run budget",
    "memory": "a step after the run short of memory",
    "block-out-of-bounds": "a block outside its array",
    "callback-error": "a failed callback",
    "out-of-bounds": "an access outside its buffer",
    "slice-out-of-bounds": "a slice past the end of its ref",
    "interpreter": "an operation JAX's Mosaic GPU interpreter cannot run",
    "interpreter-check": "a kernel JAX's Mosaic GPU interpreter stopped",
    "no-gpu": "a question for a GPU asked where there is none",
    "reference": "a reference that does not match the call",
    "usage": "a mistake on the magic line",
    "reproducer": "no reproducer written",
    "internal": "a failure inside pallaslab",
    "error": "an exception",
}


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """One failure, explained.

    Attributes:
        kind: What went wrong, as a short identifier (e.g. "traced-if").
        summary: One sentence: what went wrong.
        hint: What to do about it ("" when there is nothing general to say).
        location: The source line it points at, when one was found.
        label: How to name the location's file in messages ("Cell line").
        error_type: The original exception's type name.
    """

    kind: str
    summary: str
    hint: str = ""
    location: SourceLocation | None = None
    label: str = ""
    error_type: str = ""

    def __post_init__(self) -> None:
        # One rule for every message shown (magic, banner, CLI): bounded lines.
        # Room is left on the first line for "Cell [12] line 345: ".
        summary = messages.clip(self.summary, max_lines=6, max_line_chars=_SUMMARY_LINE)
        object.__setattr__(self, "summary", summary)
        object.__setattr__(self, "hint", messages.clip(self.hint, max_lines=4, max_chars=1200))

    @property
    def title(self) -> str:
        """What went wrong in a few words ("a Python if on a traced value"), for lists."""
        if self.kind == "error" and self.error_type:
            return self.error_type
        return KIND_TITLES.get(self.kind, self.kind.replace("-", " "))

    @property
    def line(self) -> int | None:
        """The line it points at, if any."""
        return self.location.line if self.location else None

    def message(self) -> str:
        """`Cell line 7: <summary>` followed by the hint on its own line."""
        where = f"{self.label} {self.location.line}: " if self.location and self.label else ""
        text = where + self.summary
        return messages.clip(f"{text}\n{self.hint}" if self.hint else text)
