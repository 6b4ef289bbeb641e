"""Long texts (jaxprs, IR) in the inspector: shown clipped, sent whole on demand.

A kernel can lower to tens of thousands of lines. Drawn inline they would choke
the page; kept in the widget's state they would travel in every state sync and
sit in the notebook file (a 100k-line jaxpr made an 11 MB pane and 59 MB of static
HTML), and a state message that the page sends back would hit Tornado's 10 MiB
websocket limit. So a view shows the first `INLINE_LINES` lines; the whole text
goes out only when asked for ("Open in new tab"), as a header message and chunks
of at most `CHUNK_CHARS`, and saved notebooks keep at most `STATIC_TAB_CHARS` of
each tab's static HTML.

Fetching a whole text goes through the inspector's one request route
(`ctx.request(body)` in JavaScript, `Inspector.request` in Python): first
`{"textKey": k, "chunk": -1}`, answered with `header_reply`, then
`{"textKey": k, "chunk": i}` for each piece, answered with `chunk_reply`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from pallaslab._src.views.contracts import OpenTextRequest, TextChunkReply, TextHeaderReply

#: Lines a view draws inline; longer texts open whole in their own tab.
INLINE_LINES = 3000
#: Characters a pane draws inline at most, all its texts together.
INLINE_CHARS = 768 << 10
#: Characters of one line drawn at most; the rest is cut, saying how much.
MAX_LINE_CHARS = 4000
#: Characters of text per message when a whole text is sent (JSON escapes at most
#: 6 bytes per character: a piece stays under 2 MiB whatever it holds).
CHUNK_CHARS = 256 << 10
#: Characters of one tab's static HTML kept in saved notebooks.
STATIC_TAB_CHARS = 512 << 10
#: Characters of the whole static HTML of an inspector (all tabs) at most.
STATIC_PAGE_CHARS = 1536 << 10


def clip_line(line: str, limit: int | None = None) -> str:
    """One line cut to `limit` characters (default `MAX_LINE_CHARS`), saying how much."""
    limit = MAX_LINE_CHARS if limit is None else limit
    if len(line) <= limit:
        return line
    return f"{line[:limit]} … ({len(line) - limit:,} more characters)"


def clip(
    text: str,
    source_map: Sequence[Sequence[int]],
    max_lines: int | None = None,
    max_chars: int | None = None,
) -> tuple[str, list[list[int]], int]:
    """The first lines of a text and the map entries that point into them.

    At most `max_lines` lines (default `INLINE_LINES`) and `max_chars` characters
    (default `INLINE_CHARS`) are kept, each line cut to `MAX_LINE_CHARS`.

    Args:
        text: The whole text.
        source_map: Its [text line, file, source line] entries.
        max_lines: Lines to keep.
        max_chars: Characters to keep.

    Returns:
        The shown text, its map entries and the text's total number of lines.
    """
    max_lines = INLINE_LINES if max_lines is None else max_lines
    max_chars = INLINE_CHARS if max_chars is None else max_chars
    lines = text.split("\n")
    total = len(lines)
    shown: list[str] = []
    used = 0
    for line in lines[:max_lines]:
        cut = clip_line(line)
        if shown and used + len(cut) > max_chars:
            break
        shown.append(cut)
        used += len(cut) + 1
    kept = len(shown)
    if kept == total and shown == lines:
        return text, [list(entry) for entry in source_map], total
    return "\n".join(shown), [list(entry) for entry in source_map if entry[0] <= kept], total


def is_clipped(shown: str, total: int, whole: str) -> bool:
    """Whether a view's inline text is not the whole text (lines or characters cut)."""
    return len(shown) != len(whole) or shown.count("\n") + 1 != total


def chunks(text: str, size: int | None = None) -> list[str]:
    """The text cut into pieces of at most `size` (default `CHUNK_CHARS`) characters."""
    size = CHUNK_CHARS if size is None else size
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def header_reply(detail: OpenTextRequest) -> TextHeaderReply:
    """What a whole text is, and in how many pieces it comes (`chunk == -1`)."""
    return {
        "title": detail["title"],
        "language": detail["language"],
        "sourceMap": detail["sourceMap"],
        "sources": detail["sources"],
        "chunks": len(chunks(detail["text"])),
    }


def chunk_reply(detail: OpenTextRequest, index: int) -> TextChunkReply:
    """Piece `index` of a whole text.

    Raises:
        IndexError: If the text has no such piece.
    """
    pieces = chunks(detail["text"])
    if not 0 <= index < len(pieces):
        raise IndexError(f"the text has {len(pieces)} piece(s), not {index + 1}")
    return {"index": index, "text": pieces[index]}


def clip_html(body: str, title: str, limit: int | None = None) -> str:
    """A tab's static HTML, or a note in its place when it is too large to save."""
    if len(body) <= (STATIC_TAB_CHARS if limit is None else limit):
        return body
    return (
        f"<p class='pl-notice'>The {html.escape(title)} tab is too large for a saved notebook "
        f"({len(body) / (1 << 20):.1f} MiB of HTML); run the cell to see it live.</p>"
    )
