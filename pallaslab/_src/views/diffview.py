"""A `Diff` on screen: the inspector's front end with one Diff tab, and its static page.

`pallaslab.diff(a, b)` and `%%kernel ... --diff NAME` display a `DiffView`: the
inspector's widget (same header, tab bar and styles) holding one tab, Diff, whose
model is `views/diffmodel.py`'s. A diff compares two inspections, so it is a view of
its own, shown under the cell's inspector, rather than a tab of either. The static
HTML (saved notebooks, untrusted ones, GitHub) renders the same model with
`views/statichtml/diff.py`.
"""

from __future__ import annotations

from typing import Any

import traitlets

from pallaslab._src.base import messages
from pallaslab._src.records.diffs import Diff
from pallaslab._src.views.contracts import DiffPane, ErrorPane, Header, TabInfo
from pallaslab._src.views.diffmodel import diff_pane
from pallaslab._src.views.inspector import MAX_PANE_BYTES, TabbedWidget, json_size
from pallaslab._src.views.statichtml.diff import diff as diff_parts
from pallaslab._src.views.statichtml.nodes import Node, h, to_html

#: The Diff tab's id and title.
DIFF_TAB: TabInfo = {"id": "diff", "title": "Diff"}


def diff_header(diff: Diff) -> Header:
    """The header: what is compared with what, and the chip the figures are for."""
    kernel = (
        diff.a_kernel if diff.a_kernel == diff.b_kernel else f"{diff.a_kernel} → {diff.b_kernel}"
    )
    return {
        "name": f"diff {diff.a_name} → {diff.b_name}",
        "backend": "",
        "mode": "",
        "kernels": [],
        "check": None,
        "badges": [f"kernel {kernel}", f"figures for {diff.chip}"],
    }


def pane(diff: Diff) -> DiffPane | ErrorPane:
    """The Diff tab's model, or an error in its place (never over the pane budget)."""
    try:
        model = diff_pane(diff)
    except Exception as error:
        return {"error": f"The diff could not be drawn: {messages.describe(error)}"}
    size = json_size(model)
    if size > MAX_PANE_BYTES:
        return {
            "error": f"The diff is too large to show here ({size / (1 << 20):.1f} MiB); "
            "diff.text() and diff.to_frame('lines') have every row."
        }
    return model


class DiffView(TabbedWidget):
    """One `Diff` in the inspector's front end: a header and a Diff tab.

    The traits are the inspector's (`views/contracts.py`): `header`, `tabs`,
    `selected`, `problem`, and the one pane `pane_diff` (a `DiffPane`).
    """

    selected = traitlets.Unicode("diff").tag(sync=True)
    pane_diff = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)

    def __init__(self, diff: Diff, **kwargs: Any):
        self._diff = diff
        super().__init__(
            header=diff_header(diff),
            tabs=[DIFF_TAB],
            selected="diff",
            pane_diff=pane(diff),
            **kwargs,
        )

    @property
    def diff(self) -> Diff:
        """The diff shown."""
        return self._diff

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle_ = super()._repr_mimebundle_(**kwargs)
        data = bundle_[0] if isinstance(bundle_, tuple) else bundle_
        if data is not None:
            data["text/plain"] = self._diff.text()
            data["text/html"] = static_html(self._diff)
        return bundle_


def bundle(diff: Diff, **kwargs: Any) -> dict[str, Any]:
    """The Jupyter mime bundle: the widget, its static HTML and the plain text."""
    found = DiffView(diff)._repr_mimebundle_(**kwargs)
    data = found[0] if isinstance(found, tuple) else found
    return dict(data)


def static_html(diff: Diff) -> str:
    """The diff as one self-contained, escaped HTML block (the Diff tab, saved)."""
    head = diff_header(diff)
    model = pane(diff)
    if "error" in model:
        body: list[Node] = [h("p", "pl-problem", str(model.get("error")))]
    else:
        body = diff_parts(model)
    return to_html(
        h(
            "div",
            "pallaslab-static pallaslab-diff",
            h(
                "div",
                "pl-header",
                h("span", "pl-brand", "pallaslab"),
                h("span", "pl-title", head["name"]),
                [h("span", "pl-badge", b) for b in head.get("badges", [])],
            ),
            body,
        )
    )
