"""The inspector's tabs: each is one small module exposing a `Tab`.

A tab turns an inspection into a JSON payload for the widget's JavaScript renderer
of the same id (`static/tabs/<id>.js`) and into static HTML for saved notebooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

Payload = dict[str, Any]


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
    """

    id: str
    title: str
    payload: Callable[[Inspection], Payload]
    static_html: Callable[[Inspection], str]
    eager: bool = True


def all_tabs() -> list[Tab]:
    """The tabs, in display order."""
    from pallaslab._src.views.tabs import jaxpr, overview, run, source  # noqa: PLC0415

    return [overview.TAB, source.TAB, jaxpr.TAB, run.TAB]
