"""The inspector's tabs: each is one small module exposing a `Tab` named `TAB`.

A tab turns an inspection into one view model (`views/contracts.py`): the widget
renders it (`labextension/src/widget/tabs/<id>.ts`) and the static renderer
(`views/statichtml/`) makes the saved notebook's HTML from it. Adding a tab is adding
its module here, its model's types to the contracts, and a renderer on each side:
modules here are discovered, and shown in the order of their `Tab.order`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

# A view model, a request's body or its reply: JSON values (typed in views/contracts.py).
Payload = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Tab:
    """One tab of the inspector.

    Attributes:
        id: Identifier shared with the widget's renderer (`contracts.TabId`).
        title: The tab's label.
        model: Builds the tab's view model: the widget's pane and what the static
            HTML shows.
        eager: Whether the model is built when the inspector opens; lazy tabs are
            built when first selected.
        order: Position among the tabs (lower first).
        respond: Answers the tab's requests from the front end (`ctx.request(body)`
            in TypeScript), for data too costly to send up front; None if it has none.
        text: Returns one whole text of the tab by key (`contracts.OpenTextRequest`),
            for texts too long to send inline (see `views/texts.py`); None when the
            tab has none.
        static_model: What the static HTML shows, when more than the model: the
            IR tab adds the replies for the lowerings done so far. None: the model.
    """

    id: str
    title: str
    model: Callable[[Inspection], Payload]
    eager: bool = True
    order: int = 50
    respond: Callable[[Inspection, dict[str, Any]], Payload] | None = None
    text: Callable[[Inspection, str], Payload] | None = None
    static_model: Callable[[Inspection], Payload] | None = None


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
