"""What kernels print, as it reaches a notebook: clipped, saved whole, or muted.

`pl.debug_print` in 10^5 programs writes 10^5 lines: a megabyte in one cell's output
that the notebook then carries forever. While `clipped()` is in force, the first
`max_lines` lines (at most `max_chars` characters) reach the stream as usual; the rest
goes to a file, and at the end one line says how much was clipped and where all of it
is. `muted()` drops what is printed (the checks that re-run a kernel print nothing the
user has not seen). Prints come from `sys.stdout` writes, which XLA's host callbacks
make on their own threads, so both replace `sys.stdout` for the block and lock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from pallaslab._src.base import paths, words

#: Lines of kernel output shown in a cell, at most, by default.
MAX_LINES = 200
#: Characters of kernel output shown in a cell, at most, by default.
MAX_CHARS = 20_000

_lock = threading.RLock()
_active: ClippedStream | None = None


@dataclasses.dataclass(frozen=True)
class Clipping:
    """How much output one `clipped()` block held back.

    Attributes:
        shown_lines: Lines that reached the stream.
        clipped_lines: Lines that did not.
        clipped_chars: Characters that did not.
        path: The file holding the whole output (None when nothing was clipped).
    """

    shown_lines: int
    clipped_lines: int
    clipped_chars: int
    path: Path | None

    def describe(self) -> str:
        """The line said after the output ("" when nothing was clipped)."""
        if self.path is None:
            return ""
        total = self.shown_lines + self.clipped_lines
        return (
            f"[pallaslab] {self.clipped_lines:,} more lines of output "
            f"({words.nbytes(self.clipped_chars)}) not shown; all {total:,} lines are in "
            f"{self.path}"
        )


class ClippedStream(io.TextIOBase):
    """A text stream passing its first lines on and keeping everything in a file."""

    def __init__(self, target: TextIO, max_lines: int, max_chars: int) -> None:
        super().__init__()
        self.target = target
        self.max_lines = max_lines
        self.max_chars = max_chars
        self.shown_lines = 0
        self.shown_chars = 0
        self.clipped_lines = 0
        self.clipped_chars = 0
        self._shown: list[str] = []  # what was shown: the file starts with it
        self._partial = False  # the last shown text ended mid-line
        self._file: TextIO | None = None
        self.path: Path | None = None

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.target, "encoding", None) or "utf-8")

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        with _lock:
            for piece in text.splitlines(keepends=True):
                self._write_piece(piece)
        return len(text)

    def _write_piece(self, piece: str) -> None:
        fits = (
            self._file is None
            and self.shown_chars + len(piece) <= self.max_chars
            and (self.shown_lines < self.max_lines or self._partial)
        )
        if fits:
            self.target.write(piece)
            self._shown.append(piece)
            self.shown_chars += len(piece)
            if not self._partial:
                self.shown_lines += 1
            self._partial = not piece.endswith("\n")
            return
        if self._file is None:
            self._open_file()
        assert self._file is not None
        self._file.write(piece)
        self.clipped_chars += len(piece)
        self.clipped_lines += 1

    def _open_file(self) -> None:
        folder = paths.cache_dir() / "output"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _forget_old(folder)
        except OSError:
            folder = Path(tempfile.gettempdir())
        stamp = time.strftime("%Y%m%d-%H%M%S")
        handle, name = tempfile.mkstemp(prefix=f"kernel-output-{stamp}-", suffix=".txt", dir=folder)
        self._file = os.fdopen(handle, "w", encoding="utf-8", errors="replace")
        self.path = Path(name)
        self._file.writelines(self._shown)
        if self._partial:  # the clipped line goes on in the file, not in the cell
            self.target.write("\n")
            self._partial = False

    def flush(self) -> None:
        with _lock:
            if self._file is not None:
                self._file.flush()
            with contextlib.suppress(Exception):
                self.target.flush()

    def finish(self) -> Clipping:
        """Closes the file; what was clipped."""
        with _lock:
            if self._file is not None:
                self._file.close()
            return Clipping(self.shown_lines, self.clipped_lines, self.clipped_chars, self.path)

    def __getattr__(self, name: str) -> Any:  # fileno, buffer ...: the stream's own
        return getattr(self.target, name)


#: Saved outputs kept in pallaslab's cache directory; older ones are removed.
KEEP_FILES = 50


def _forget_old(folder: Path) -> None:
    saved = sorted(folder.glob("kernel-output-*.txt"), key=lambda p: p.stat().st_mtime)
    for old in saved[: max(0, len(saved) - KEEP_FILES + 1)]:
        old.unlink(missing_ok=True)


class _Muted(io.TextIOBase):
    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


@contextlib.contextmanager
def clipped(max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> Iterator[None]:
    """Within the block, `sys.stdout` shows at most `max_lines` lines; the rest is saved.

    Nested blocks share the outermost one. At the end, one line on `sys.stdout` says
    how many lines were clipped and which file holds them all.
    """
    global _active  # noqa: PLW0603
    with _lock:
        if _active is not None:
            owner = False
        else:
            owner = True
            original = sys.stdout
            _active = ClippedStream(original, max_lines, max_chars)
            sys.stdout = _active
    if not owner:
        yield
        return
    try:
        yield
    finally:
        with _lock:
            stream, _active = _active, None
            if sys.stdout is stream:
                sys.stdout = original
            assert stream is not None
            found = stream.finish()
        if found.path is not None:
            original.write(found.describe() + "\n")


@contextlib.contextmanager
def muted() -> Iterator[None]:
    """Within the block, what is written to `sys.stdout` is dropped."""
    with _lock:
        previous = sys.stdout
        sys.stdout = _Muted()
    try:
        yield
    finally:
        with _lock:
            sys.stdout = previous
