"""The Source tab: the code the kernels come from, with kernel and BlockSpec lines marked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pallaslab._src.views.contracts import SourcePane
from pallaslab._src.views.sourceview import source_files
from pallaslab._src.views.tabs import Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def payload(inspection: Inspection) -> SourcePane:
    """The Source tab's view model."""
    return {"files": [f.to_json() for f in source_files(inspection)]}


TAB = Tab("source", "Source", payload, order=20)
