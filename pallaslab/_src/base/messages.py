"""One rule for every message pallaslab shows: the magic, the inspector's banner, the CLI.

Messages quote exceptions, and exceptions can be anything: a megabyte of text, a
JAX error that embeds a whole traceback, or an object whose `__str__` raises. What
reaches the user goes through `clip` (a bounded number of lines, each of bounded
length) and, for exceptions, `error_text` (which never raises).
"""

from __future__ import annotations

#: Lines of one message shown at most (the magic adds a one-line header).
MAX_LINES = 12
#: Characters of one line shown at most.
MAX_LINE_CHARS = 600
#: Characters of one message shown at most.
MAX_CHARS = 3000
#: Characters of an exception's text kept for reading it (matching, first lines).
MAX_ERROR_CHARS = 20_000


def clip(
    text: str,
    *,
    max_lines: int = MAX_LINES,
    max_line_chars: int = MAX_LINE_CHARS,
    max_chars: int = MAX_CHARS,
) -> str:
    """The text cut to at most `max_lines` lines of `max_line_chars`, `max_chars` in all.

    What is cut is said in place: `… (1,234 more characters)` at the end of a long
    line, `… (5 more lines)` as the last line.
    """
    lines = text.split("\n")
    if max_lines <= 1:
        lines = lines[:1]
    kept: list[str] = []
    used = 0
    for number, line in enumerate(lines):
        if len(kept) == max_lines - 1 and number < len(lines) - 1:
            kept.append(f"… ({len(lines) - number:,} more lines)")
            break
        room = max(0, min(max_line_chars, max_chars - used))
        shown = _cut(line, room) if len(line) > room else line
        kept.append(shown)
        used += len(shown) + 1
        if used >= max_chars and number < len(lines) - 1:
            kept.append(f"… ({len(lines) - number - 1:,} more lines)")
            break
    return "\n".join(kept)


def _cut(line: str, room: int) -> str:
    keep = max(0, room - len(f" … ({len(line):,} more characters)"))
    return line[:keep].rstrip() + f" … ({len(line) - keep:,} more characters)"


def error_text(error: BaseException, limit: int | None = MAX_ERROR_CHARS) -> str:
    """`str(error)`, never raising, cut to `limit` characters (None: whole)."""
    try:
        text = str(error)
    except Exception as inner:  # a broken __str__ must not hide the error itself
        return f"(its message could not be shown: {type(inner).__name__} in __str__)"
    if limit is not None and len(text) > limit:
        return text[:limit] + f" … ({len(text) - limit:,} more characters)"
    return text


def one_line(error: BaseException) -> str:
    """`TypeName: first line of the message`, clipped: for lists and tables."""
    lines = error_text(error, None).strip().splitlines()
    first = lines[0] if lines else ""
    return clip(f"{type(error).__name__}: {first}".rstrip(": "), max_lines=1)


def describe(error: BaseException) -> str:
    """`TypeName: message`, clipped (the whole message, not only its first line)."""
    text = error_text(error, None).strip()
    return clip(f"{type(error).__name__}: {text}" if text else type(error).__name__)
