"""The Jaxpr tab: the program's and each kernel's jaxpr, linked to source lines."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from pallaslab._src.views.highlight import highlight_html
from pallaslab._src.views.sourceview import source_files
from pallaslab._src.views.tabs import Payload, Tab

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


def payload(inspection: Inspection) -> Payload:
    """The Jaxpr tab's data: texts plus (line, file index, source line) maps."""
    files = source_files(inspection)
    index = {f.file: k for k, f in enumerate(files)}
    views = [
        {
            "id": view["id"],
            "title": view["title"],
            "text": view["text"],
            "map": [
                [line, index[file], source_line]
                for line, file, source_line in view["map"]
                if file in index
            ],
        }
        for view in _views(inspection)
    ]
    return {"views": views, "files": [f.to_json() for f in files]}


def static_html(inspection: Inspection) -> str:
    """The Jaxpr tab as HTML."""
    parts = []
    for view in _views(inspection):
        body = "\n".join(highlight_html(line, "jaxpr") for line in view["text"].splitlines())
        parts.append(f"<h4>{html.escape(view['title'])}</h4><pre class='pl-code'>{body}</pre>")
    return "".join(parts) or "<p>No jaxpr.</p>"


TAB = Tab("jaxpr", "Jaxpr", payload, static_html, order=30)
