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

    def __init__(
        self,
        inspection: Inspection,
        problem: Problem | None = None,
        selected: str | None = None,
        **kwargs: Any,
    ):
        self._inspection = inspection
        self._problem = problem
        self._texts: dict[tuple[str, str], dict[str, Any]] = {}
        self._tab_list: list[Tab] = all_tabs()
        ids = [t.id for t in self._tab_list]
        first = selected if selected in ids else ids[0]
        super().__init__(
            header=header(inspection),
            tabs=[{"id": t.id, "title": t.title} for t in self._tab_list],
            panes={t.id: self._build(t) for t in self._tab_list if t.eager},
            selected=first,
            problem=problem.to_json() if problem else None,
            **kwargs,
        )
        self._load_selected({"new": first})
        self.on_msg(self._on_request)

    @property
    def inspection(self) -> Inspection:
        """The inspection shown."""
        return self._inspection

    def _build(self, tab: Tab) -> dict[str, Any]:
        try:
            return tab.payload(self._inspection)
        except Exception as error:
            return {"error": f"{tab.title} could not be built: {type(error).__name__}: {error}"}

    @traitlets.observe("selected")
    def _load_selected(self, change: dict[str, Any]) -> None:
        tab_id = change["new"]
        if tab_id in self.panes:
            return
        for tab in self._tab_list:
            if tab.id == tab_id:
                self.panes = {**self.panes, tab_id: self._build(tab)}
                return

    def _on_request(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A tab asks for data: `{"tab", "id", "body"}`; the reply carries the same id."""
        if not isinstance(content, dict) or "tab" not in content:
            return
        self.send({"tab": content["tab"], "id": content.get("id"), "reply": self.request(content)})

    def request(self, content: dict[str, Any]) -> dict[str, Any]:
        """Answers one request from a tab's front end (also callable from Python).

        `{"tab", "body"}`: a body with a `textKey` asks for a piece of one of the
        tab's whole texts (`views/texts.py`); any other body goes to `Tab.respond`.
        """
        tab = next((t for t in self._tab_list if t.id == content.get("tab")), None)
        body = dict(content.get("body") or {})
        try:
            if "textKey" in body:
                if tab is None or tab.text is None:
                    raise LookupError(f"no tab {content.get('tab')!r} with long texts")
                detail = self._whole_text(tab, str(body["textKey"]))
                index = int(body.get("chunk", -1))
                return texts.header_reply(detail) if index < 0 else texts.chunk_reply(detail, index)
            if tab is None or tab.respond is None:
                return {"error": f"the {content.get('tab')!r} tab takes no requests"}
            return tab.respond(self._inspection, body)
        except Exception as error:
            return {"error": f"{type(error).__name__}: {error}"}

    def _whole_text(self, tab: Tab, key: str) -> dict[str, Any]:
        # The header and each piece are separate requests for the same text.
        cached = self._texts.get((tab.id, key))
        if cached is None:
            cached = self._texts[(tab.id, key)] = tab.text(self._inspection, key)  # type: ignore[misc]
            while len(self._texts) > 4:
                self._texts.pop(next(iter(self._texts)))
        return cached

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
