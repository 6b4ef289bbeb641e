"""Reading source locations out of compiler texts, and hiding them from the reader.

Every lowered text pallaslab shows carries its own way of saying which source line an
instruction came from: MLIR `loc(...)` attributes and `#locN = ...` tables, LLVM
`!dbg` metadata, PTX `.loc` directives, SASS `//## File` markers from nvdisasm, and
`/* loc(...) */` comments in TPU bundles. Each function here takes the raw text and
returns the text a person wants to read (location noise removed) with a source map:
`(text line, source file, source line)` entries, 1-based, several per line allowed.

Plain text processing: no JAX, no MLIR bindings, so it is fast and testable alone.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator

from pallaslab._src.base import sources

SourceMap = tuple[tuple[int, str, int], ...]
# Files compilers name when they do not know the file (Triton's debug info for a
# function whose own location is unknown).
UNKNOWN_FILES = frozenset({"<unknown>", "", "-"})


# ---------------------------------------------------------------------------
# MLIR locations.


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
                return _unescape(file_loc.group(1)), int(file_loc.group(2))
            return None
        return None  # unknown, or a form we do not read


def _unescape(text: str) -> str:
    return text.replace('\\"', '"').replace("\\\\", "\\")


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
            if found:
                file, source_line = found
                if file in UNKNOWN_FILES:
                    file = default_file
                if file and source_line > 0:
                    source_map.append((len(lines), file, source_line))
    return "\n".join(lines), tuple(source_map)


# ---------------------------------------------------------------------------
# PTX.

_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_PTX_SECTION = re.compile(r"^\s*\.section\s+\.debug_")


def ptx_text(ptx: str, default_file: str = "") -> tuple[str, SourceMap]:
    """PTX with line info -> (PTX without `.loc`/`.file`/debug sections, source map).

    Every instruction after a `.loc` maps to its line until the next `.loc`. `.file`
    directives may come after the code that names them (LLVM puts them at the end).
    """
    files: dict[int, str] = {
        int(match.group(1)): _unescape(match.group(2))
        for match in map(_PTX_FILE.match, ptx.splitlines())
        if match
    }
    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    current: tuple[str, int] | None = None
    skipping = False  # inside a `.section .debug_*` block
    seen_brace = False
    depth = 0
    for line in ptx.splitlines():
        if _PTX_SECTION.match(line):
            skipping, seen_brace, depth = True, False, 0
        if skipping:
            depth += line.count("{") - line.count("}")
            seen_brace = seen_brace or "{" in line
            if seen_brace and depth <= 0:
                skipping = False
            continue
        if _PTX_FILE.match(line):
            continue
        loc = _PTX_LOC.match(line)
        if loc:
            file = files.get(int(loc.group(1)), "")
            if file in UNKNOWN_FILES:
                file = default_file
            source_line = int(loc.group(2))
            current = (file, source_line) if file and source_line > 0 else None
            continue
        lines.append(line)
        stripped = line.strip()
        if current and _is_code(stripped, ("//",)):
            source_map.append((len(lines), *current))
        if stripped.startswith("}"):
            current = None  # a function ends: later lines are not its code
    return "\n".join(lines), tuple(source_map)


def _is_code(stripped: str, comment_prefixes: Iterable[str]) -> bool:
    if not stripped or stripped in ("{", "}"):
        return False
    return not any(stripped.startswith(p) for p in comment_prefixes)


# ---------------------------------------------------------------------------
# SASS (nvdisasm -g).

_SASS_MARKER = re.compile(r'^\s*//## File "((?:[^"\\]|\\.)*)", line (\d+)')


def sass_text(sass: str, default_file: str = "") -> tuple[str, SourceMap]:
    """Nvdisasm `-g` output -> (SASS without `//## File` markers, source map)."""
    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    current: tuple[str, int] | None = None
    for line in sass.splitlines():
        marker = _SASS_MARKER.match(line)
        if marker:
            file = _unescape(marker.group(1))
            if file in UNKNOWN_FILES:
                file = default_file
            source_line = int(marker.group(2))
            current = (file, source_line) if file and source_line > 0 else None
            continue
        lines.append(line)
        stripped = line.strip()
        if current and stripped.startswith("/*") and "*/" in stripped:
            source_map.append((len(lines), *current))  # an instruction: /*0010*/ ...
        elif stripped.startswith(("//---", ".section")):
            # A new section (function). Labels (`.L_x_9:`) do not end a line's run:
            # nvdisasm marks only where the source line changes, branch targets or not.
            current = None
    return "\n".join(lines), tuple(source_map)


# ---------------------------------------------------------------------------
# LLVM IR.

_LLVM_DBG = re.compile(r",?\s*!dbg !(\d+)")
_LLVM_META = re.compile(r"^!(\d+) = (?:distinct )?!(\w+)\((.*)\)\s*$")
_LLVM_FIELD = re.compile(r'(\w+): (?:"((?:[^"\\]|\\.)*)"|(!\d+|\d+))')
_LLVM_DEBUG_NAMED = re.compile(r"^!llvm\.dbg\.")


def llvm_text(llvm: str, default_file: str = "") -> tuple[str, SourceMap]:
    """LLVM IR -> (IR without `!dbg` attachments and debug metadata, source map)."""
    metadata: dict[str, tuple[str, dict[str, str]]] = {}
    for line in llvm.splitlines():
        match = _LLVM_META.match(line)
        if match and match.group(2).startswith("DI"):
            fields = {
                f.group(1): (f.group(2) if f.group(2) is not None else str(f.group(3)))
                for f in _LLVM_FIELD.finditer(match.group(3))
            }
            metadata["!" + match.group(1)] = (match.group(2), fields)

    @functools.cache
    def file_of(scope: str) -> str:
        kind_fields = metadata.get(scope)
        if kind_fields is None:
            return ""
        kind, fields = kind_fields
        if kind == "DIFile":
            name = fields.get("filename", "")
            directory = fields.get("directory", "")
            if directory and name and not name.startswith("/"):
                return f"{directory.rstrip('/')}/{name}"
            return name
        if "file" in fields:
            return file_of(fields["file"])
        return file_of(fields["scope"]) if "scope" in fields else ""

    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    for line in llvm.splitlines():
        meta = _LLVM_META.match(line)
        if meta and meta.group(2).startswith("DI"):
            continue
        if _LLVM_DEBUG_NAMED.match(line):
            continue
        dbg = _LLVM_DBG.search(line)
        if dbg is None:
            lines.append(line)
            continue
        lines.append(_LLVM_DBG.sub("", line).rstrip())
        entry = metadata.get("!" + dbg.group(1))
        if entry is None or entry[0] != "DILocation":
            continue
        fields = entry[1]
        source_line = int(fields.get("line", "0") or 0)
        file = file_of(fields.get("scope", ""))
        if file in UNKNOWN_FILES:
            file = default_file
        if file and source_line > 0 and not line.lstrip().startswith("define"):
            source_map.append((len(lines), file, source_line))
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines), tuple(source_map)


# ---------------------------------------------------------------------------
# TPU bundles and other texts with inline `loc(...)` comments.

_COMMENT_LOC = re.compile(r"\s*/\*\s*loc\(")


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


# ---------------------------------------------------------------------------
# HLO text (the compiled program's metadata names source lines).

_HLO_METADATA = re.compile(r'source_file="((?:[^"\\]|\\.)*)" source_line=(\d+)')


_HLO_FRAME = re.compile(r"\bstack_frame_id=(\d+)")
_HLO_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_HLO_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
_HLO_FIELD = re.compile(r"(\w+)=(\d+)")


def _hlo_frames(lines: list[str]) -> dict[int, tuple[str, int]]:
    """Stack frame id -> (file, line) from an HLO module's location tables.

    Newer XLA prints `FileNames`, `FileLocations` and `StackFrames` tables before the
    computations, and instructions name a `stack_frame_id`; a frame's own location is
    the innermost call, the user's line.
    """
    tables: dict[str, dict[int, str]] = {}
    current: dict[int, str] | None = None
    for line in lines:
        if line in _HLO_TABLES:
            current = tables.setdefault(line, {})
            continue
        row = _HLO_TABLE_ROW.match(line) if current is not None else None
        if current is None or row is None:
            current = None  # a table ends at its first line that is not a row
            continue
        current[int(row.group(1))] = row.group(2)
    files = {k: _unescape(v.strip().strip('"')) for k, v in tables.get("FileNames", {}).items()}
    locations = {}
    for key, value in tables.get("FileLocations", {}).items():
        fields = {name: int(number) for name, number in _HLO_FIELD.findall(value)}
        file = files.get(fields.get("file_name_id", 0), "")
        if file and fields.get("line", 0) > 0:
            locations[key] = (file, fields["line"])
    frames = {}
    for key, value in tables.get("StackFrames", {}).items():
        fields = {name: int(number) for name, number in _HLO_FIELD.findall(value)}
        location = locations.get(fields.get("file_location_id", 0))
        if location:
            frames[key] = location
    return frames


def hlo_text(text: str) -> tuple[str, SourceMap]:
    """HLO text: instructions whose metadata names a source line are mapped to it.

    Reads both forms XLA writes: `source_file=... source_line=...` in the metadata,
    and `stack_frame_id=N` into the module's location tables.
    """
    source_map = []
    lines = text.splitlines()
    frames = _hlo_frames(lines) if "StackFrames" in text else {}
    for number, line in enumerate(lines, 1):
        match = _HLO_METADATA.search(line)
        if match:
            source_map.append((number, _unescape(match.group(1)), int(match.group(2))))
            continue
        frame = _HLO_FRAME.search(line) if frames else None
        if frame and int(frame.group(1)) in frames:
            source_map.append((number, *frames[int(frame.group(1))]))
    return text, tuple(source_map)


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


Cleaner = Callable[[str, str], tuple[str, SourceMap]]

# The cleaner for each language a lowering can be written in.
CLEANERS: dict[str, Cleaner] = {
    "mlir": mlir_text,
    "ptx": ptx_text,
    "sass": sass_text,
    "llvm": llvm_text,
    "llo": commented_locations_text,
}


def clean(text: str, language: str, default_file: str = "") -> tuple[str, SourceMap]:
    """Text without location noise and its source map, for any known language."""
    if language == "hlo":
        return hlo_text(text)
    cleaner = CLEANERS.get(language)
    if cleaner is None:
        return text, ()
    return cleaner(text, default_file)


def readable(source_map: SourceMap) -> SourceMap:
    """The entries a view can show.

    Files with source (not `<string>` and the like) that are no one's internals
    (JAX's implementation, pallaslab's own files).
    """
    shown: dict[str, bool] = {}
    kept = []
    for entry in source_map:
        file = entry[1]
        if file not in shown:
            shown[file] = not sources.is_internal_file(file) and bool(sources.lines(file))
        if shown[file]:
            kept.append(entry)
    return tuple(kept)
