"""The inspector as self-contained static HTML, for saved and exported notebooks.

A fresh clone's notebooks are untrusted, so this is what a new user sees first: the
header and problem banner as the widget shows them, then every tab as a folded
section (the Kernels tab open) with a one-line summary, each rendered from its view
model by `views/statichtml/`. Styles are inline, so sanitizing front ends keep them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pallaslab._src.base import messages
from pallaslab._src.views.header import Problem, chip_badge, header
from pallaslab._src.views.statichtml.nodes import Markup, Node, h, to_html
from pallaslab._src.views.statichtml.panes import RENDERERS
from pallaslab._src.views.tabs import Payload, Tab, all_tabs
from pallaslab._src.views.texts import STATIC_PAGE_CHARS, clip_html

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

#: The tab whose section is open in a saved notebook.
OPEN_TAB = "overview"


def _header(inspection: Inspection, problem: Problem | None) -> list[Node]:
    head = header(inspection)
    kernels = len(head["kernels"])
    badges = [
        h(
            "span",
            "pl-badge",
            head["backend"] + (f" \u00b7 {head['mode']}" if head["mode"] else ""),
        ),
        h("span", "pl-badge", f"{kernels} kernel{'' if kernels == 1 else 's'}"),
    ]
    if inspection.chip:
        badges.append(h("span", "pl-badge", chip_badge(inspection)))
    if head["check"] is not None:
        badges.append(
            h("span", "pl-pass", "\u2713 matches reference")
            if head["check"]
            else h("span", "pl-fail", "\u2717 DIFFERS from reference")
        )
    parts = [
        h(
            "div",
            "pl-header",
            h("span", "pl-brand", "pallaslab"),
            h("span", "pl-title", head["name"]),
            badges,
        )
    ]
    if problem is not None:
        parts.append(
            h(
                "div",
                "pl-problem",
                h("b", "", f"{problem.where}: ") if problem.where else None,
                problem.summary,
                f"\n{problem.hint}" if problem.hint else None,
            )
        )
    return parts


def tab_html(tab: Tab, inspection: Inspection, built: Payload | None = None) -> tuple[str, str]:
    """One tab's body as HTML and its one-line summary ("" when it has none).

    Args:
        tab: The tab.
        inspection: What it shows.
        built: The tab's view model as the widget built it, when it has one already
            (used unless the tab has a model of its own for static pages).

    Raises:
        KeyError: For a tab with no static renderer.
    """
    render, summarize = RENDERERS[tab.id]
    if tab.static_model is not None:
        model = tab.static_model(inspection)
    else:
        model = built if built is not None else tab.model(inspection)
    return "".join(to_html(part) for part in render(model)), summarize(model)


def static_tab(inspection: Inspection, tab_id: str) -> str:
    """One tab's static HTML (as it stands inside its section of the page).

    Raises:
        StopIteration: For a tab id the inspector has not.
    """
    return tab_html(next(t for t in all_tabs() if t.id == tab_id), inspection)[0]


def static_page(
    inspection: Inspection,
    problem: Problem | None = None,
    built: Mapping[str, Payload] | None = None,
) -> str:
    """Every tab of the inspector as one escaped, styled HTML fragment.

    `built`: view models the widget already built, by tab id (not built again).
    """
    head = "".join(to_html(part) for part in _header(inspection, problem))
    sections: list[Node] = []
    used = len(head)
    for tab in all_tabs():
        if tab.id not in RENDERERS:
            continue
        try:
            body, note = tab_html(tab, inspection, (built or {}).get(tab.id))
        except Exception as error:
            body = to_html(
                h("p", "pl-problem", f"Could not render this tab: {messages.describe(error)}")
            )
            note = "could not be rendered"
        # The page travels in one display message: all tabs together stay bounded.
        body = clip_html(body, tab.title)
        body = clip_html(body, tab.title, limit=max(0, STATIC_PAGE_CHARS - used))
        used += len(body)
        summary = h(
            "summary",
            "pl-summary",
            h("b", "", tab.title),
            h("span", "pl-summary-note", note) if note else None,
        )
        opened = {"open": "open"} if tab.id == OPEN_TAB else {}
        sections.append(h("details", "", summary, h("div", "pl-body", Markup(body)), **opened))
    footer = h(
        "div",
        "pl-footer",
        "Saved view of a pallaslab inspector: run the cell for the live one "
        "(linked source lines, tile maps to scrub, IR for any target).",
    )
    return to_html(h("div", "pallaslab-static", Markup(head), sections, footer))
