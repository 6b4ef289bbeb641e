"""An exercise's feedback as static HTML: verdict, cases, what is wrong, hint, heatmap.

Static (no widget): it reads the same in a live kernel, a saved notebook, on Colab and
on GitHub. Every text is escaped. No JAX here.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from pallaslab._src.views import heatmap

if TYPE_CHECKING:
    from pallaslab._src.records.feedback import Feedback

_GREEN, _RED, _DIM = "#1a7f37", "#cf222e", "#59636e"


def bundle(feedback: Feedback, **_: Any) -> dict[str, Any]:
    """The Jupyter mime bundle: HTML, and the text summary for plain frontends."""
    return {"text/plain": feedback.summary(), "text/html": feedback_html(feedback)}


def feedback_html(feedback: Feedback) -> str:
    """The feedback as one self-contained HTML block."""
    colour = _GREEN if feedback.ok else _RED
    mark = "✓" if feedback.ok else "✗"
    parts = [
        "<div class='pallaslab-static pallaslab-feedback' "
        "style='font-family:system-ui,sans-serif;font-size:13px;"
        f"border-left:4px solid {colour};padding:4px 10px'>",
        f"<div><b style='color:{colour}'>{mark} {html.escape(feedback.verdict)}</b> "
        f"· <code>{html.escape(feedback.exercise)}</code> {html.escape(feedback.title)}</div>",
    ]
    if feedback.cases:
        parts.append("<ul style='margin:4px 0'>")
        for case in feedback.cases:
            tint = _GREEN if case.ok else _RED
            parts.append(
                f"<li><code>{html.escape(case.label)}</code>: "
                f"<span style='color:{tint}'>{html.escape(case.summary)}</span></li>"
            )
        parts.append("</ul>")
    if feedback.message:
        parts.append(f"<p style='margin:4px 0'>{html.escape(feedback.message)}</p>")
    if feedback.hint:
        parts.append(f"<p style='margin:4px 0'><b>Hint:</b> {html.escape(feedback.hint)}</p>")
    parts.extend(_heatmaps(feedback))
    parts.extend(
        f"<p style='margin:4px 0;color:{_DIM}'>Note: {html.escape(note)}</p>"
        for note in feedback.notes
    )
    parts.append("</div>")
    return "".join(parts)


def _heatmaps(feedback: Feedback) -> list[str]:
    """The output blocks that differ, for the first case that differs."""
    check = feedback.check
    if check is None or feedback.ok:
        return []
    for point in check.failing:
        if point.comparison is None or point.comparison.problem:
            continue
        shown = [
            f"<p style='margin:6px 0 2px;color:{_DIM}'>{html.escape(point.label)}: "
            f"{html.escape(heatmap.describe(data))}</p>{heatmap.static_svg(data)}"
            for data in heatmap.differing(point.comparison.tiles)
        ]
        if shown:
            return shown
    return []
