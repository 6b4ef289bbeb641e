"""Reading source locations out of compiler texts, and hiding them from the reader.

Every lowered text pallaslab shows carries its own way of saying which source line an
instruction came from: MLIR `loc(...)` attributes and `#locN = ...` tables, LLVM
`!dbg` metadata, PTX `.loc` directives, SASS `//## File` markers from nvdisasm, and
`/* loc(...) */` comments in TPU bundles. Each function here takes the raw text and
returns the text a person wants to read (location noise removed) with a source map:
`(text line, source file, source line)` entries, 1-based, several per line allowed.

Plain text processing: no JAX, no MLIR bindings, so it is fast and testable alone.
One module a family of formats: `mlir` (MLIR, TPU bundles), `gpu` (PTX, SASS, LLVM
IR), `hlo`; `locations` holds what they share. Here: `clean` picks the reader for a
language, `readable` keeps what a view can show.
"""

from __future__ import annotations

from collections.abc import Callable

from pallaslab._src.base import sources
from pallaslab._src.core.lowering.sourcemap.gpu import (
    collapse_inline_asm_locs,
    llvm_text,
    ptx_text,
    sass_instructions,
    sass_text,
)
from pallaslab._src.core.lowering.sourcemap.hlo import hlo_text
from pallaslab._src.core.lowering.sourcemap.locations import UNKNOWN_FILES, SourceMap
from pallaslab._src.core.lowering.sourcemap.mlir import (
    LocationResolver,
    commented_locations,
    commented_locations_text,
    elide_long_strings,
    mlir_text,
    split_locations,
)

__all__ = [
    "CLEANERS",
    "UNKNOWN_FILES",
    "LocationResolver",
    "SourceMap",
    "clean",
    "collapse_inline_asm_locs",
    "commented_locations",
    "commented_locations_text",
    "elide_long_strings",
    "hlo_text",
    "llvm_text",
    "mlir_text",
    "ptx_text",
    "readable",
    "sass_instructions",
    "sass_text",
    "split_locations",
]

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
