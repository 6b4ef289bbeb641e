"""The GPU compile's texts: PTX `.loc` directives, SASS `//## File` markers, LLVM `!dbg`."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from pallaslab._src.core.lowering.sourcemap.locations import SourceMap, located, unescape

_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"((?:[^"\\]|\\.)*)"')
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_PTX_SECTION = re.compile(r"^\s*\.section\s+\.debug_")
# The first line of PTX whose inline-assembly `.loc`s were put back on their lines.
COLLAPSED_MARK = "// pallaslab: each inline asm block names its own source line"
# LLVM brackets inline assembly (Triton's loads and stores, wgmma) with these comments.
_ASM_BEGIN = "// begin inline asm"
_ASM_END = "// end inline asm"


def collapse_inline_asm_locs(ptx: str) -> str:
    """PTX whose inline-assembly blocks each name the one source line they come from.

    LLVM's NVPTX printer (since early 2026) puts a `.loc` before every instruction of
    an inline-assembly block, with the block's source line plus the instruction's
    line number within the block: a load written on line 13 becomes `.loc 1 13`,
    `.loc 1 14` ... `.loc 1 17`, and a `wgmma.wait_group` after a one-line comment
    `.loc 1 111` for line 110, naming lines that never produced it (a blank line,
    the statements after it). Each such `.loc` is put back on the block's line, so
    that ptxas' line table (and the SASS nvdisasm prints from it) says the same.
    The result starts with a comment saying so, and is returned as is when given
    again (subtracting twice would be wrong).
    """
    if ptx.startswith(COLLAPSED_MARK):
        return ptx
    lines: list[str] = [COLLAPSED_MARK]
    inside = False
    index = 0  # lines of the block before this one (its own `.loc`s aside)
    for line in ptx.splitlines():
        stripped = line.strip()
        if stripped == _ASM_BEGIN:
            inside, index = True, 0
        elif stripped == _ASM_END:
            inside = False
        elif inside:
            loc = _PTX_LOC.match(line)
            if loc is None:
                index += 1
            else:
                written = int(loc.group(2))
                own = written - index if written - index >= 1 else written
                lines.append(f"{line[: loc.start(2)]}{own}{line[loc.end(2) :]}")
                continue
        lines.append(line)
    return "\n".join(lines) + ("\n" if ptx.endswith("\n") else "")


def ptx_text(ptx: str, default_file: str = "") -> tuple[str, SourceMap]:
    """PTX with line info -> (PTX without `.loc`/`.file`/debug sections, source map).

    Every instruction after a `.loc` maps to its line until the next `.loc`; an
    inline-assembly block maps whole to its first (`collapse_inline_asm_locs`).
    `.file` directives may come after the code that names them (LLVM puts them at
    the end).
    """
    ptx = collapse_inline_asm_locs(ptx).removeprefix(COLLAPSED_MARK + "\n")
    files: dict[int, str] = {
        int(match.group(1)): unescape(match.group(2))
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
            current = located(files.get(int(loc.group(1)), ""), int(loc.group(2)), default_file)
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


_SASS_MARKER = re.compile(r'^\s*//## File "((?:[^"\\]|\\.)*)", line (\d+)')


# nvdisasm `-hex` writes each instruction's 128-bit encoding as two 64-bit words: the
# first after the instruction (`... ; /* 0x... */`), the second on a line of its own.
_SASS_HEX = re.compile(r"\s*/\*\s*0x([0-9a-fA-F]{16})\s*\*/\s*$")
_SASS_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s*(.*?)\s*$")


def sass_text(sass: str, default_file: str = "") -> tuple[str, SourceMap]:
    """Nvdisasm `-g` output -> (SASS without `//## File` markers, source map).

    Encodings (`-hex`) are left out: the text reads as nvdisasm's without them, and
    `sass_instructions` reads them.
    """
    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    current: tuple[str, int] | None = None
    for raw in sass.splitlines():
        marker = _SASS_MARKER.match(raw)
        if marker:
            current = located(unescape(marker.group(1)), int(marker.group(2)), default_file)
            continue
        encoding = _SASS_HEX.search(raw)
        line = raw[: encoding.start()].rstrip() if encoding else raw
        if encoding and not line.strip():
            continue  # the second word of an encoding, on its own line
        lines.append(line)
        stripped = line.strip()
        if current and stripped.startswith("/*") and "*/" in stripped:
            source_map.append((len(lines), *current))  # an instruction: /*0010*/ ...
        elif stripped.startswith(("//---", ".section")):
            # A new section (function). Labels (`.L_x_9:`) do not end a line's run:
            # nvdisasm marks only where the source line changes, branch targets or not.
            current = None
    return "\n".join(lines), tuple(source_map)


def sass_instructions(
    sass: str, default_file: str = ""
) -> list[tuple[int, str, tuple[int, ...], tuple[str, int] | None]]:
    """Each instruction of an nvdisasm listing: (address, text, encoding words, source).

    The words are the instruction's 64-bit halves as `-hex` prints them (none without
    `-hex`); the source is the `//## File` marker's line in force (`-g`).
    """
    found: list[tuple[int, str, tuple[int, ...], tuple[str, int] | None]] = []
    current: tuple[str, int] | None = None
    for line in sass.splitlines():
        marker = _SASS_MARKER.match(line)
        if marker:
            current = located(unescape(marker.group(1)), int(marker.group(2)), default_file)
            continue
        stripped = line.strip()
        if stripped.startswith(("//---", ".section")):
            current = None
            continue
        encoding = _SASS_HEX.search(line)
        body = line[: encoding.start()] if encoding else line
        instruction = _SASS_INSTRUCTION.match(body)
        if instruction:
            words: tuple[int, ...] = (int(encoding.group(1), 16),) if encoding else ()
            text = instruction.group(2).rstrip(" ;").strip()
            found.append((int(instruction.group(1), 16), text, words, current))
        elif encoding and not body.strip() and found:
            address, text, words, source = found[-1]
            found[-1] = (address, text, (*words, int(encoding.group(1), 16)), source)
    return found


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
        where = located(file_of(fields.get("scope", "")), source_line, default_file)
        if where and not line.lstrip().startswith("define"):
            source_map.append((len(lines), *where))
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines), tuple(source_map)
