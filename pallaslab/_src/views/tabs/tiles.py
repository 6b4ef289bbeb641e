"""The Tiles tab: which block of each operand every program reads and writes.

Each operand is drawn as its array cut into blocks, shaded by how many programs read
(or write) each element; hovering or scrubbing a program lights its blocks up in
every operand; a play button steps through the programs in the backend's order.
Below: figures of merit against a chosen chip, and, for one chosen program, the
element-level loads and stores its body makes (requested from Python on demand).
The model is `tilesdata.payload`; saved notebooks draw it with `views/tilesfig.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pallaslab._src.views import tilesdata
from pallaslab._src.views.contracts import AccessesReply, ErrorPane, TilesPane
from pallaslab._src.views.tabs import Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def payload(inspection: Inspection) -> TilesPane:
    """The Tiles tab's view model (see `tilesdata.payload`)."""
    return tilesdata.payload(inspection)


def respond(inspection: Inspection, body: dict[str, Any]) -> AccessesReply | ErrorPane:
    """Requests from the tab: `{"kind": "accesses", "kernel": k, "program": [...]}`."""
    if body.get("kind") != "accesses":
        return {"error": f"unknown request {body.get('kind')!r}"}
    kernel = int(body.get("kernel", 0))
    program = [int(p) for p in body.get("program") or []]
    try:
        block = inspection.accesses(kernel, program)
    except (ValueError, IndexError, KeyError) as error:
        return {"error": str(error)}
    return tilesdata.accesses_json(block)


def static_model(inspection: Inspection) -> TilesPane:
    """The model as saved notebooks show it (`tilesdata.payload(static=True)`)."""
    return tilesdata.payload(inspection, static=True)


TAB = Tab(
    "tiles", "Tiles", payload, eager=False, order=35, respond=respond, static_model=static_model
)
