"""Scanning a line of Python-like text for characters outside brackets and quotes."""

from __future__ import annotations

from collections.abc import Iterator


def top_level(text: str) -> Iterator[tuple[int, str]]:
    """(position, character) of each character outside brackets and string quotes.

    `f(x, "a b") --ref y` yields the blank before `--ref` but not those inside the
    call; the closing bracket or quote itself is not yielded.
    """
    depth = 0
    quote = ""
    for pos, char in enumerate(text):
        if quote:
            if char == quote and text[pos - 1] != "\\":
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0:
            yield pos, char
