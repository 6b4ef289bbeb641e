"""What every compiler text's reader shares: the source map's shape, unknown files, names.

A source map is `(text line, source file, source line)` entries, 1-based, several per
line allowed.
"""

from __future__ import annotations

SourceMap = tuple[tuple[int, str, int], ...]

# Files compilers name when they do not know the file (Triton's debug info for a
# function whose own location is unknown).
UNKNOWN_FILES = frozenset({"<unknown>", "", "-"})


def located(file: str, line: int, default_file: str) -> tuple[str, int] | None:
    """A compiler's file and line as a location, None where either is missing.

    A file compilers name when they do not know it stands for `default_file`.
    """
    if file in UNKNOWN_FILES:
        file = default_file
    return (file, line) if file and line > 0 else None


def unescape(text: str) -> str:
    """A file name as quoted in a compiler text, its escaped quotes and backslashes undone."""
    return text.replace('\\"', '"').replace("\\\\", "\\")
