"""The Jaxpr tab: the program's and each kernel's jaxpr, linked to source lines."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pallaslab._src.views import texts
from pallaslab._src.views.contracts import JaxprPane, JaxprView, OpenTextRequest, SourceMapEntry
from pallaslab._src.views.sourceview import source_files
from pallaslab._src.views.tabs import Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def _views(inspection: Inspection) -> list[dict[str, Any]]:
    views = [
        {
            "id": f"kernel{k.index}",
            "title": f"kernel {k.name}",
            "text": k.jaxpr,
            "map": k.jaxpr_source_map,
        }
        for k in inspection.kernels
    ]
    if inspection.jaxpr:
        views.append(
            {
                "id": "program",
                "title": f"program {inspection.name}",
                "text": inspection.jaxpr,
                "map": inspection.jaxpr_source_map,
            }
        )
    return views


def _indexed_map(view: dict[str, Any], index: dict[str, int]) -> list[SourceMapEntry]:
    return [
        (line, index[file], source_line) for line, file, source_line in view["map"] if file in index
    ]


def payload(inspection: Inspection) -> JaxprPane:
    """The Jaxpr tab's view model: texts plus (line, file index, source line) maps.

    Long jaxprs are clipped to `texts.INLINE_LINES` lines (`lines` says how many
    there are); `text_of` sends one whole.
    """
    files = source_files(inspection)
    index = {f.file: k for k, f in enumerate(files)}
    views: list[JaxprView] = []
    whole = _views(inspection)
    # The pane's inline budget is shared by its texts (a cell may hold many kernels).
    share = max(texts.MAX_LINE_CHARS, texts.INLINE_CHARS // max(1, len(whole)))
    for view in whole:
        text, source_map, lines = texts.clip(
            view["text"], _indexed_map(view, index), max_chars=share
        )
        views.append(
            {
                "id": view["id"],
                "title": view["title"],
                "text": text,
                "map": [(a, b, c) for a, b, c in source_map],
                "lines": lines,
                "clipped": texts.is_clipped(text, lines, view["text"]),
            }
        )
    return {"views": views, "files": [f.to_json() for f in files]}


def text_of(inspection: Inspection, key: str) -> OpenTextRequest:
    """One whole jaxpr (`key`: a view id) with its line map, for "Open in new tab"."""
    files = source_files(inspection)
    index = {f.file: k for k, f in enumerate(files)}
    for view in _views(inspection):
        if view["id"] == key:
            return {
                "title": f"jaxpr \u00b7 {view['title']}",
                "language": "jaxpr",
                "text": view["text"],
                "sourceMap": _indexed_map(view, index),
                "sources": [
                    {"label": f.label, "first": f.first, "lines": list(f.lines)} for f in files
                ],
            }
    raise KeyError(f"no jaxpr {key!r}")


TAB = Tab("jaxpr", "Jaxpr", payload, order=30, text=text_of)
