"""MLIR's `loc(...)` locations: read out of MLIR text, and out of `/* loc(...) */` comments.

MLIR prints each op's location as `loc(...)` (often an alias to a `#locN = loc(...)`
table entry); libtpu's LLO bundles carry the same expressions in comments. String
literals are skipped whole, and long ones (kernel bytecode) can be elided.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pallaslab._src.core.lowering.sourcemap.locations import (
    UNKNOWN_FILES,
    SourceMap,
    located,
    unescape,
)


def _skip_string(text: str, pos: int) -> int:
    """Position after the string literal starting at `text[pos] == '"'`."""
    pos += 1
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
            continue
        if char == '"':
            return pos + 1
        pos += 1
    return pos


def _outside_strings(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(position, character, bracket depth after it) of each character outside strings."""
    depth = 0
    pos = start
    while pos < len(text):
        char = text[pos]
        if char == '"':
            pos = _skip_string(text, pos)
            continue
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        yield pos, char, depth
        pos += 1


def _matching_paren(text: str, open_pos: int) -> int:
    """Index of the parenthesis closing the one at `open_pos` (-1 if unbalanced)."""
    for pos, char, depth in _outside_strings(text, open_pos):
        if depth == 0 and char in ")]}>":
            return pos
    return -1


# A string literal (skipped whole) or the start of a location outside one.
_STRING_OR_LOC = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![\w.#])loc\(')
_TRAILING_ALIAS = re.compile(r"^(.*?[^\w.#])loc\((#loc\d*)\)\s*$")


def split_locations(line: str) -> tuple[str, list[str]]:
    """Removes every ` loc(...)` from an MLIR line; returns the line and their insides.

    String literals are skipped, so a `loc(` inside a string attribute stays.
    """
    if "loc(" not in line:
        return line.rstrip(), []
    if '"' not in line and line.count("loc(") == 1:
        # The common case, fast: one trailing alias, `... loc(#loc12)`.
        simple = _TRAILING_ALIAS.match(line)
        if simple:
            return simple.group(1).rstrip(), [simple.group(2)]
    pieces: list[str] = []
    found: list[str] = []
    start = pos = 0
    while True:
        match = _STRING_OR_LOC.search(line, pos)
        if match is None:
            break
        if match.group().startswith('"'):
            pos = match.end()
            continue
        close = _matching_paren(line, match.end() - 1)
        if close < 0:
            break
        cut = match.start()
        while cut > start and line[cut - 1] == " ":
            cut -= 1
        pieces.append(line[start:cut])
        found.append(line[match.end() : close])
        pos = start = close + 1
    pieces.append(line[start:])
    return "".join(pieces).rstrip(), found


_FILE_LOC = re.compile(r'^"((?:[^"\\]|\\.)*)":(\d+)(?::(\d+))?')
_ALIAS = re.compile(r"^#(loc\d*)$")
_ALIAS_DEF = re.compile(r"^#(loc\d*) = loc\((.*)\)\s*$")


class LocationResolver:
    """Resolves MLIR location expressions (with `#locN` aliases) to (file, line)."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        self._aliases = aliases or {}
        self._resolved: dict[str, tuple[str, int] | None] = {}

    def resolve(self, expr: str) -> tuple[str, int] | None:
        """The innermost file location of `expr` (the callee of a call site)."""
        return self._resolve(expr.strip(), 0)

    def _resolve(self, expr: str, depth: int) -> tuple[str, int] | None:
        if depth > 64 or not expr:
            return None
        alias = _ALIAS.match(expr)
        if alias:
            name = alias.group(1)
            if name not in self._resolved:
                self._resolved[name] = None  # breaks cycles
                self._resolved[name] = self._resolve(self._aliases.get(name, ""), depth + 1)
            return self._resolved[name]
        if expr.startswith("callsite("):
            inner = expr[len("callsite(") : _matching_paren(expr, len("callsite"))]
            callee, caller = _split_top_level(inner, " at ")
            return self._resolve(callee, depth + 1) or self._resolve(caller, depth + 1)
        if expr.startswith("fused"):
            bracket = expr.find("[")
            if bracket < 0:
                return None
            inner = expr[bracket + 1 : _matching_paren(expr, bracket)]
            for part in _split_all(inner, ","):
                found = self._resolve(part, depth + 1)
                if found:
                    return found
            return None
        if expr.startswith('"'):
            file_loc = _FILE_LOC.match(expr)
            end = _skip_string(expr, 0)
            if end < len(expr) and expr[end] == "(":
                # A name location wrapping a child: "name"(child).
                return self._resolve(expr[end + 1 : _matching_paren(expr, end)], depth + 1)
            if file_loc:
                return unescape(file_loc.group(1)), int(file_loc.group(2))
            return None
        return None  # unknown, or a form we do not read


def _split_top_level(text: str, separator: str) -> tuple[str, str]:
    """Splits at the first `separator` outside brackets and strings."""
    for pos, char, depth in _outside_strings(text):
        if depth == 0 and char not in "([{<)]}>" and text.startswith(separator, pos):
            return text[:pos], text[pos + len(separator) :]
    return text, ""


def _split_all(text: str, separator: str) -> list[str]:
    parts = []
    rest = text
    while rest:
        head, rest = _split_top_level(rest, separator)
        parts.append(head.strip())
    return parts


def mlir_text(asm: str, default_file: str = "") -> tuple[str, SourceMap]:
    """MLIR printed with debug info -> (text without locations, source map).

    `#locN = loc(...)` tables are dropped and resolved; each op line maps to the
    source line of its own location (the last `loc(...)` on the line), following
    name locations to their child and call sites to the callee.
    """
    aliases: dict[str, str] = {}
    body: list[str] = []
    for line in asm.splitlines():
        definition = _ALIAS_DEF.match(line)
        if definition:
            aliases[definition.group(1)] = definition.group(2)
        else:
            body.append(line)
    resolver = LocationResolver(aliases)
    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    for line in body:
        clean, locations = split_locations(line)
        lines.append(clean)
        if locations:
            found = resolver.resolve(locations[-1])
            where = located(*found, default_file) if found else None
            if where:
                source_map.append((len(lines), *where))
    return "\n".join(lines), tuple(source_map)


_COMMENT_LOC = re.compile(r"\s*/\*\s*loc\(")


def commented_locations(
    text: str, resolver: LocationResolver, default_file: str = ""
) -> list[tuple[str, int]]:
    """The distinct (file, line) of the `/* loc(...) */` comments in `text`, in order."""
    found: list[tuple[str, int]] = []
    for match in _COMMENT_LOC.finditer(text):
        open_paren = match.end() - 1
        close = _matching_paren(text, open_paren)
        if close < 0:
            continue
        location = resolver.resolve(text[open_paren + 1 : close])
        if location:
            file = default_file if location[0] in UNKNOWN_FILES else location[0]
            if file and (file, location[1]) not in found:
                found.append((file, location[1]))
    return found


def commented_locations_text(text: str, default_file: str = "") -> tuple[str, SourceMap]:
    """Text with `/* loc(...) */` comments (libtpu's LLO source annotations).

    A bundle can hold instructions from several source lines: its text line gets
    one map entry per distinct line, in order of appearance.
    """
    resolver = LocationResolver()
    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    for line in text.splitlines():
        found: list[tuple[str, int]] = []
        pieces: list[str] = []
        pos = 0
        for match in _COMMENT_LOC.finditer(line):
            if match.start() < pos:
                continue
            open_paren = match.end() - 1
            close = _matching_paren(line, open_paren)
            end = line.find("*/", close) if close >= 0 else -1
            if end < 0:
                continue
            location = resolver.resolve(line[open_paren + 1 : close])
            if location:
                file = default_file if location[0] in UNKNOWN_FILES else location[0]
                if file and (file, location[1]) not in found:
                    found.append((file, location[1]))
            pieces.append(line[pos : match.start()])
            pos = end + 2
        pieces.append(line[pos:])
        lines.append("".join(pieces).rstrip())
        source_map.extend((len(lines), file, source_line) for file, source_line in found)
    return "\n".join(lines), tuple(source_map)


def elide_long_strings(text: str, limit: int = 240) -> str:
    """Text with string literals longer than `limit` cut short.

    Kernel bytecode in custom-call configs runs to hundreds of kilobytes on one line.
    """
    if len(text) < limit:
        return text
    pieces: list[str] = []
    pos = start = 0
    while True:
        pos = text.find('"', pos)
        if pos < 0:
            break
        end = _skip_string(text, pos)
        if end - pos - 2 > limit:
            pieces.append(text[start : pos + 1 + 48])
            pieces.append(f'... {end - pos - 2 - 48} more characters elided"')
            start = end
        pos = end
    pieces.append(text[start:])
    return "".join(pieces)
