"""The Source tab: the code the kernels come from, with kernel and BlockSpec lines marked."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from pallaslab._src.views.highlight import highlight_html
from pallaslab._src.views.sourceview import SourceFile, source_files
from pallaslab._src.views.tabs import Payload, Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def payload(inspection: Inspection) -> Payload:
    """The Source tab's data."""
    return {"files": [f.to_json() for f in source_files(inspection)]}


def code_block_html(source: SourceFile) -> str:
    """A source window as a numbered, highlighted `<pre>`."""
    marked = {m.line: m.text for m in source.marks}
    rows = []
    for offset, line in enumerate(source.lines):
        number = source.first + offset
        note = (
            f' <span class="pl-mark">&larr; {html.escape(marked[number])}</span>'
            if number in marked
            else ""
        )
        rows.append(
            f'<span class="pl-ln">{number:>4}</span> {highlight_html(line, "python")}{note}'
        )
    return f"<h4>{html.escape(source.label)}</h4><pre class='pl-code'>" + "\n".join(rows) + "</pre>"


def static_html(inspection: Inspection) -> str:
    """The Source tab as HTML."""
    files = source_files(inspection)
    if not files:
        return "<p>No source is available for these kernels.</p>"
    return "".join(code_block_html(f) for f in files)


TAB = Tab("source", "Source", payload, static_html, order=20)
