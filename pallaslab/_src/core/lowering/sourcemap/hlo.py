"""HLO text: the compiled program's metadata names source lines (two forms, by XLA version)."""

from __future__ import annotations

import re

from pallaslab._src.core.lowering.sourcemap.locations import SourceMap, unescape

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
    files = {k: unescape(v.strip().strip('"')) for k, v in tables.get("FileNames", {}).items()}
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
            source_map.append((number, unescape(match.group(1)), int(match.group(2))))
            continue
        frame = _HLO_FRAME.search(line) if frames else None
        if frame and int(frame.group(1)) in frames:
            source_map.append((number, *frames[int(frame.group(1))]))
    return text, tuple(source_map)
