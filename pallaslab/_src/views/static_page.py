"""The inspector as self-contained static HTML, for saved and exported notebooks."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from pallaslab._src.base import messages
from pallaslab._src.views.header import Problem, header
from pallaslab._src.views.tabs import all_tabs
from pallaslab._src.views.texts import STATIC_PAGE_CHARS, clip_html

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

# Readable without this style too (front ends may strip <style>): the structure is
# headings, tables and <pre>.
_STYLE = """
.pallaslab-static{font-family:system-ui,sans-serif;font-size:13px;border:1px solid #d1d9e0;
border-radius:4px;padding:6px 10px}
.pallaslab-static pre{background:#f6f8fa;padding:6px;overflow:auto;font-size:12px}
.pallaslab-static table{border-collapse:collapse}
.pallaslab-static td,.pallaslab-static th{border:1px solid #d1d9e0;padding:2px 6px;text-align:left}
.pallaslab-static .pl-problem{border-left:4px solid #cf222e;padding:4px 8px;white-space:pre-wrap}
.pallaslab-static .pl-ln{color:#6e7781}.pallaslab-static .pl-mark{color:#1976d2}
.pallaslab-static .pl-notice{color:#59636e;font-style:italic}
.pallaslab-static .pl-tok-keyword{color:#cf222e}
.pallaslab-static .pl-tok-primitive,.pallaslab-static .pl-tok-function{color:#8250df}
.pallaslab-static .pl-tok-type{color:#0550ae}.pallaslab-static .pl-tok-comment{color:#6e7781}
.pallaslab-static .pl-tok-variable{color:#116329}
"""


def static_page(inspection: Inspection, problem: Problem | None = None) -> str:
    """Every tab of the inspector as one escaped HTML fragment."""
    head = header(inspection)
    badges = [head["backend"] + (f" · {head['mode']}" if head["mode"] else "")]
    if head["check"] is not None:
        badges.append("matches reference" if head["check"] else "DIFFERS from reference")
    parts = [
        f"<style>{_STYLE}</style>",
        f"<div><b>pallaslab</b> <code>{html.escape(head['name'])}</code> — "
        f"{html.escape(' · '.join(badges))}</div>",
    ]
    if problem is not None:
        where = f"<b>{html.escape(problem.where)}:</b> " if problem.where else ""
        hint = f"\n{html.escape(problem.hint)}" if problem.hint else ""
        parts.append(f"<div class='pl-problem'>{where}{html.escape(problem.summary)}{hint}</div>")
    used = sum(len(p) for p in parts)
    for tab in all_tabs():
        try:
            body = clip_html(tab.static_html(inspection), tab.title)
        except Exception as error:
            body = f"<p>Could not render this tab: {html.escape(messages.describe(error))}</p>"
        # The page travels in one display message: all tabs together stay bounded.
        body = clip_html(body, tab.title, limit=max(0, STATIC_PAGE_CHARS - used))
        used += len(body)
        parts.append(
            f"<details open><summary><b>{html.escape(tab.title)}</b></summary>{body}</details>"
        )
    return "<div class='pallaslab-static'>" + "".join(parts) + "</div>"
