"""The inspector widget (anywidget): tabs over one inspection, panes built lazily.

Every message the widget sends stays under `MAX_MESSAGE_BYTES` (2 MiB of JSON),
whatever the kernel: each pane is its own synced trait (`pane_<tab id>`), so
building one sends that pane alone, once; a pane that would not fit shows an error
instead; and the built panes together stay under `MAX_STATE_BYTES`, the least
recently shown ones dropped (and rebuilt when shown again), so that the whole state,
sent when a page asks for it, fits too. Replies to the tabs' requests are measured
the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import anywidget
import traitlets

from pallaslab._src.base import messages
from pallaslab._src.views import bundle, texts
from pallaslab._src.views.contracts import OpenTextRequest, TabInfo, TabReplyMessage
from pallaslab._src.views.header import Problem, header, summary_text
from pallaslab._src.views.static_page import static_page
from pallaslab._src.views.tabs import Payload, Tab, all_tabs

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

#: The largest message the widget sends (state or reply), in bytes of JSON.
MAX_MESSAGE_BYTES = 2 << 20
#: Bytes of one pane at most (what is left of a message for the rest of the state).
MAX_PANE_BYTES = 1536 << 10
#: Bytes of all built panes together (the whole state is sent when a page asks).
MAX_STATE_BYTES = 1664 << 10


def json_size(value: Any) -> int:
    """Bytes of `value` as the kernel sends it: UTF-8 JSON (as `jupyter_client` packs)."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "replace"))


def pane_trait(tab_id: str) -> str:
    """The name of the synced trait holding one tab's pane."""
    return f"pane_{tab_id}"


class TabbedWidget(anywidget.AnyWidget):
    """The inspector's front end: a header, tabs, a problem banner (`views/contracts.py`).

    Each subclass adds its panes as traits `pane_<id>`.
    """

    _esm = bundle.esm()
    _css = bundle.css()

    header = traitlets.Dict().tag(sync=True)
    tabs: traitlets.List[dict[str, str]] = traitlets.List().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    problem = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)


class Inspector(TabbedWidget):
    """Tabs over one inspection: Kernels, Source, Jaxpr, Tiles, IR, Run.

    The front end shows the pane of `selected` (the trait `pane_<id>`: the tab's view
    model, `views/contracts.py`); a pane not built yet (null) is built in Python when
    its tab is selected, so costly tabs cost nothing until asked for. The traits and
    messages are typed in `views/contracts.py` (`Header`, `TabInfo`, `ProblemModel`,
    the panes, `TabRequestMessage`, `TabReplyMessage`).
    """

    def __init__(
        self,
        inspection: Inspection,
        problem: Problem | None = None,
        selected: str | None = None,
        **kwargs: Any,
    ):
        # Summaries, not arrays: a widget lives as long as the kernel, so it holds no
        # run's outputs and only weakly the example arguments (`Traced.for_view`).
        self._inspection = inspection.for_view()
        self._problem = problem
        self._texts: dict[tuple[str, str], OpenTextRequest] = {}
        # View models built whole, by tab id (panes dropped from the state included).
        self._models: dict[str, Payload] = {}
        self._tab_list: list[Tab] = all_tabs()
        # Built panes' sizes, least recently shown first.
        self._sizes: dict[str, int] = {}
        ids = [t.id for t in self._tab_list]
        first = selected if selected in ids else ids[0]
        # One synced trait per pane: setting one sends that pane alone.
        self.add_traits(
            **{
                pane_trait(t.id): traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
                for t in self._tab_list
            }
        )
        eager = {pane_trait(t.id): self._build(t) for t in self._tab_list if t.eager}
        self._fit_state(keep=pane_trait(first))
        super().__init__(
            header=header(inspection),
            tabs=[cast(TabInfo, {"id": t.id, "title": t.title}) for t in self._tab_list],
            selected=first,
            problem=problem.to_json() if problem else None,
            **{name: pane for name, pane in eager.items() if name[5:] in self._sizes},
            **kwargs,
        )
        self._load_selected({"new": first})
        self.on_msg(self._on_request)

    @property
    def inspection(self) -> Inspection:
        """The inspection shown."""
        return self._inspection

    @property
    def panes(self) -> dict[str, Payload]:
        """The panes built so far (and not dropped to keep the state small), by tab id."""
        found = {}
        for tab in self._tab_list:
            pane = getattr(self, pane_trait(tab.id), None)
            if pane is not None:
                found[tab.id] = pane
        return found

    def _build(self, tab: Tab) -> Payload:
        """The tab's pane, or an error pane in its place; never over `MAX_PANE_BYTES`."""
        pane: Payload
        try:
            pane = tab.model(self._inspection)
            size = json_size(pane)
            if size <= MAX_PANE_BYTES:
                self._models[tab.id] = pane  # the static page draws the same model
        except Exception as error:
            pane = {"error": f"{tab.title} could not be built: {messages.describe(error)}"}
            size = json_size(pane)
        if size > MAX_PANE_BYTES:
            pane = {
                "error": f"The {tab.title} tab is too large to show here ({size / (1 << 20):.1f} "
                f"MiB of data, the limit is {MAX_PANE_BYTES >> 10} KiB); the inspection in "
                "Python has everything (e.g. _kernel)."
            }
            size = json_size(pane)
        self._sizes.pop(tab.id, None)
        self._sizes[tab.id] = size
        return pane

    def _fit_state(self, keep: str) -> None:
        """Drops the least recently shown panes until the built ones fit the state."""
        while sum(self._sizes.values()) > MAX_STATE_BYTES and len(self._sizes) > 1:
            oldest = next(t for t in self._sizes if pane_trait(t) != keep)
            del self._sizes[oldest]
            if self._trait_values.get(pane_trait(oldest)) is not None:
                setattr(self, pane_trait(oldest), None)

    @traitlets.observe("selected")
    def _load_selected(self, change: dict[str, Any]) -> None:
        tab_id = change["new"]
        if tab_id in self._sizes:
            self._sizes[tab_id] = self._sizes.pop(tab_id)  # now the most recently shown
        for tab in self._tab_list:
            if tab.id == tab_id and getattr(self, pane_trait(tab_id), None) is None:
                pane = self._build(tab)
                self._fit_state(keep=pane_trait(tab_id))
                setattr(self, pane_trait(tab_id), pane)
                return

    def _on_request(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """A tab asks for data: `{"tab", "id", "body"}`; the reply carries the same id."""
        if not isinstance(content, dict) or "tab" not in content:
            return
        reply = self.request(content)
        size = json_size(reply)
        if size > MAX_MESSAGE_BYTES - (4 << 10):
            reply = {
                "error": f"the reply is too large to send ({size / (1 << 20):.1f} MiB of data)",
                "type": "failed",
                "message": "the reply is too large to send",
            }
        message = {"tab": content["tab"], "id": content.get("id"), "reply": reply}
        self.send(cast(TabReplyMessage, message))

    def request(self, content: Mapping[str, Any]) -> Payload:
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
            return {"error": messages.describe(error)}

    def _whole_text(self, tab: Tab, key: str) -> OpenTextRequest:
        # The header and each piece are separate requests for the same text.
        cached = self._texts.get((tab.id, key))
        if cached is None:
            assert tab.text is not None
            found = cast(OpenTextRequest, tab.text(self._inspection, key))
            cached = self._texts[(tab.id, key)] = found
            while len(self._texts) > 4:
                self._texts.pop(next(iter(self._texts)))
        return cached

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle_ = super()._repr_mimebundle_(**kwargs)
        data = bundle_[0] if isinstance(bundle_, tuple) else bundle_
        if data is not None:
            data["text/plain"] = summary_text(self._inspection, self._problem)
            data["text/html"] = static_page(self._inspection, self._problem, self._models)
        return bundle_


def mimebundle(inspection: Inspection, **kwargs: Any) -> Any:
    """The mime bundle that displays an inspection: the widget plus static fallbacks."""
    return Inspector(inspection)._repr_mimebundle_(**kwargs)
