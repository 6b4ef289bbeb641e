"""The inspector widget (anywidget): tabs over one inspection, panes built lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from pallaslab._src.views import bundle, texts
from pallaslab._src.views.header import Problem, header, summary_text
from pallaslab._src.views.static_page import static_page
from pallaslab._src.views.tabs import Tab, all_tabs

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


class Inspector(anywidget.AnyWidget):
    """Tabs over one inspection: Kernels, Source, Jaxpr, Run (and more as they land).

    The front end shows the pane of `selected`; a pane not yet in `panes` is built
    in Python when its tab is first selected, so costly tabs cost nothing until
    asked for.
    """

    _esm = bundle.esm()
    _css = bundle.css()

    header = traitlets.Dict().tag(sync=True)
    tabs: traitlets.List[dict[str, str]] = traitlets.List().tag(sync=True)
    panes = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    problem = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)

    def __init__(self, inspection: Inspection, problem: Problem | None = None, **kwargs: Any):
        self._inspection = inspection
        self._problem = problem
        self._tab_list: list[Tab] = all_tabs()
        first = self._tab_list[0].id
        super().__init__(
            header=header(inspection),
            tabs=[{"id": t.id, "title": t.title} for t in self._tab_list],
            panes={t.id: self._build(t) for t in self._tab_list if t.eager},
            selected=first,
            problem=problem.to_json() if problem else None,
            **kwargs,
        )
        self.on_msg(self._on_custom_message)

    @property
    def inspection(self) -> Inspection:
        """The inspection shown."""
        return self._inspection

    def _build(self, tab: Tab) -> dict[str, Any]:
        try:
            return tab.payload(self._inspection)
        except Exception as error:
            return {"error": f"{tab.title} could not be built: {type(error).__name__}: {error}"}

    def _on_custom_message(self, _: Any, content: Any, buffers: Any) -> None:
        """Sends a whole long text when the front end asks for it (`views/texts.py`)."""
        if not isinstance(content, dict) or content.get("type") != texts.GET_TEXT:
            return
        request = content.get("request", 0)
        tab = next((t for t in self._tab_list if t.id == content.get("tab")), None)
        try:
            if tab is None or tab.text is None:
                raise LookupError(f"no tab {content.get('tab')!r} with long texts")
            detail = tab.text(self._inspection, str(content.get("key", "")))
        except Exception as error:
            self.send(texts.error_message(request, f"{type(error).__name__}: {error}"))
            return
        for message in texts.text_messages(request, detail):
            self.send(message)

    @traitlets.observe("selected")
    def _load_selected(self, change: dict[str, Any]) -> None:
        tab_id = change["new"]
        if tab_id in self.panes:
            return
        for tab in self._tab_list:
            if tab.id == tab_id:
                self.panes = {**self.panes, tab_id: self._build(tab)}
                return

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle_ = super()._repr_mimebundle_(**kwargs)
        data = bundle_[0] if isinstance(bundle_, tuple) else bundle_
        if data is not None:
            data["text/plain"] = summary_text(self._inspection, self._problem)
            data["text/html"] = static_page(self._inspection, self._problem)
        return bundle_


def mimebundle(inspection: Inspection, **kwargs: Any) -> Any:
    """The mime bundle that displays an inspection: the widget plus static fallbacks."""
    return Inspector(inspection)._repr_mimebundle_(**kwargs)
