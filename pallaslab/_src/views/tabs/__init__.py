"""The inspector's tabs: each is one small module exposing a `Tab` named `TAB`.

A tab turns an inspection into a JSON payload for the widget's JavaScript renderer
of the same id (`static/tabs/<id>.js`) and into static HTML for saved notebooks.
Adding a tab is adding those two files: modules here are discovered, and shown in
the order of their `Tab.order`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

Payload = dict[str, Any]
# Answers a message from the tab's front end: (inspection, message, send).


@dataclasses.dataclass(frozen=True)
class Tab:
    """One tab of the inspector.

    Attributes:
        id: Identifier shared with the JavaScript renderer.
        title: The tab's label.
        payload: Builds the widget's data for this tab.
        static_html: Renders the tab as self-contained HTML (already escaped).
        eager: Whether the payload is built when the inspector opens; lazy tabs are
            built when first selected.
        order: Position among the tabs (lower first).
        respond: Answers the tab's requests from the front end (`ctx.request(body)`
            in JavaScript), for data too costly to send up front; None if it has none.
        text: Returns one whole text of the tab by key (`{"title", "language",
            "text", "sourceMap", "sources"}`), for texts too long to send inline
            (see `views/texts.py`); None when the tab has none.
    """

    id: str
    title: str
    payload: Callable[[Inspection], Payload]
    static_html: Callable[[Inspection], str]
    eager: bool = True
    order: int = 50
    respond: Callable[[Inspection, dict[str, Any]], Payload] | None = None
    text: Callable[[Inspection, str], dict[str, Any]] | None = None


@functools.cache
def _discovered() -> tuple[Tab, ...]:
    tabs = []
    for module in pkgutil.iter_modules(__path__):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        tab = getattr(loaded, "TAB", None)
        if isinstance(tab, Tab):
            tabs.append(tab)
    return tuple(sorted(tabs, key=lambda t: (t.order, t.id)))


def all_tabs() -> list[Tab]:
    """The tabs, in display order."""
    return list(_discovered())
