"""Renderable parts: a small tree of elements and text, written out as escaped HTML.

`h("p", "pl-facts", "text", child, ...)` makes an element of a class; strings are
text (escaped when written), `Node`s are elements, None and "" are left out. The
class names are the widget's (`labextension/src/widget/inspector.css`); each one's
look is written inline from `STYLES`, so the page needs no stylesheet.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterable
from typing import Union

Child = Union["Node", "Markup", str, None]

#: Inline CSS per class (light colours on a white card: readable in dark themes too).
STYLES: dict[str, str] = {
    "pallaslab-static": (
        "font-family:system-ui,-apple-system,sans-serif;font-size:13px;"
        "line-height:1.4;color:#1f2328;background:#ffffff;border:1px solid #d1d9e0;"
        "border-radius:6px;padding:6px 10px;max-width:1200px"
    ),
    "pl-header": "display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:2px 0 6px",
    "pl-brand": "font-weight:700;color:#1976d2",
    "pl-title": "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-weight:600",
    "pl-badge": "border:1px solid #d1d9e0;border-radius:10px;padding:0 8px;color:#59636e",
    "pl-pass": "border:1px solid #1a7f37;border-radius:10px;padding:0 8px;color:#1a7f37",
    "pl-fail": "border:1px solid #cf222e;border-radius:10px;padding:0 8px;color:#cf222e",
    "pl-problem": (
        "margin:4px 0;padding:4px 10px;border-left:4px solid #cf222e;"
        "background:#ffebe9;white-space:pre-wrap"
    ),
    "pl-section": "border-top:1px solid #d1d9e0;padding:2px 0",
    "pl-summary": "cursor:pointer;padding:3px 0;border-top:1px solid #d1d9e0",
    "pl-summary-note": "color:#59636e;margin-left:6px",
    "pl-body": "padding:2px 0 6px 14px",
    "pl-kernel-name": "margin:6px 0 2px;font-size:14px",
    "pl-table": "border-collapse:collapse;margin:4px 0;font-size:13px",
    "pl-th": (
        "border:1px solid #d1d9e0;padding:2px 8px;text-align:left;background:#f6f8fa;"
        "font-weight:600"
    ),
    "pl-td": "border:1px solid #d1d9e0;padding:2px 8px;text-align:left;vertical-align:top",
    "pl-facts": "margin:2px 0;color:#59636e",
    "pl-notice": "margin:2px 0;color:#59636e;font-style:italic",
    "pl-warning": ("margin:4px 0;padding:3px 8px;border-left:4px solid #bf8700;background:#fff8c5"),
    "pl-clean": "margin:2px 0;color:#1a7f37",
    "pl-verdict-pass": "margin:4px 0;color:#1a7f37",
    "pl-verdict-fail": "margin:4px 0;color:#cf222e",
    "pl-hints": "margin:2px 0;padding-left:18px",
    "pl-hint-error": "margin:2px 0;color:#cf222e",
    "pl-hint-warning": "margin:2px 0;color:#9a6700",
    "pl-hint-info": "margin:2px 0;color:#59636e",
    "pl-hint-text": "color:#1f2328",
    "pl-small": "color:#59636e;font-size:11px",
    "pl-fit-fits": "color:#1a7f37",
    "pl-fit-fits-with-limit": "color:#9a6700;font-weight:600",
    "pl-fit-does-not-fit": "color:#cf222e;font-weight:600",
    "pl-fit-unknown": "color:#59636e",
    "pl-role-in": "color:#0969da",
    "pl-role-out": "color:#bc4c00",
    "pl-role-scratch": "color:#8250df",
    "pl-role-prefetch": "color:#8250df",
    "pl-code": (
        "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;"
        "background:#f6f8fa;border:1px solid #d1d9e0;border-radius:4px;margin:2px 0 6px;"
        "padding:4px 6px;max-height:360px;overflow:auto;white-space:pre"
    ),
    "pl-code-title": (
        "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;"
        "margin:6px 0 0;color:#59636e"
    ),
    "pl-ln": "color:#8c959f",
    "pl-mark": "color:#1976d2;font-style:italic",
    "pl-pictures": "display:flex;flex-wrap:wrap;gap:12px;margin:4px 0",
    "pl-figure": "margin:0",
    "pl-caption": "font-size:11px;color:#59636e;max-width:260px",
    "pl-footer": "color:#8c959f;font-size:11px;margin-top:4px",
    "pl-diff-summary": "margin:4px 0 6px;font-weight:600;font-size:14px",
    "pl-diff-group-title": "margin:8px 0 2px;font-size:13px",
    "pl-diff-same": "color:#8c959f",
    "pl-diff-better": "color:#1a7f37;font-weight:600",
    "pl-diff-worse": "color:#cf222e;font-weight:600",
    "pl-diff-code": (
        "font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px;"
        "white-space:pre-wrap;word-break:break-all"
    ),
    "pl-diff-old": "background:#ffebe9",
    "pl-diff-new": "background:#dafbe1",
    "pl-tok-keyword": "color:#cf222e",
    "pl-tok-directive": "color:#cf222e",
    "pl-tok-op": "color:#8250df;font-weight:600",
    "pl-tok-symbol": "color:#8250df;font-weight:600",
    "pl-tok-special": "color:#8250df",
    "pl-tok-type": "color:#0550ae",
    "pl-tok-dialect": "color:#0550ae",
    "pl-tok-label": "color:#0550ae",
    "pl-tok-number": "color:#0a3069",
    "pl-tok-string": "color:#0a3069",
    "pl-tok-comment": "color:#6e7781;font-style:italic",
    "pl-tok-location": "color:#8c959f",
    "pl-tok-attribute": "color:#953800",
    "pl-tok-meta": "color:#953800",
    "pl-tok-modifier": "color:#953800",
    "pl-tok-variable": "color:#116329",
}
# Classes written as a class attribute too (hooks for the lab extension and tests);
# the others (tokens, line numbers: the bulk of a page) only as their style.
KEPT_CLASSES = frozenset(
    {
        "pallaslab-static",
        "pl-problem",
        "pl-warning",
        "pl-notice",
        "pl-facts",
        "pl-code",
        "pl-hints",
        "pl-verdict-pass",
        "pl-verdict-fail",
        "pl-section",
        "pl-kernel-name",
        "pl-table",
    }
)


# Attributes written bare when present (`<details open>`).
BOOLEAN_ATTRIBUTES = frozenset({"open"})


@dataclasses.dataclass(frozen=True)
class Node:
    """An element: tag, class, other attributes (escaped when written), children."""

    tag: str
    cls: str = ""
    attrs: tuple[tuple[str, str], ...] = ()
    children: tuple[Node | Markup | str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Markup:
    """HTML that `to_html` wrote already (escaped there): placed as it is."""

    html: str


def h(tag: str, cls: str = "", *children: Child | Iterable[Child], **attrs: str) -> Node:
    """An element of class `cls` (several: space-separated); attributes by keyword.

    Keywords name attributes with `_` for `-` (`aria_label="..."`).
    """
    flat: list[Node | Markup | str] = []
    for child in children:
        if isinstance(child, Node | Markup | str):
            if child != "":
                flat.append(child)
        elif child is not None:
            flat.extend(c for c in child if c is not None and c != "")
    named = tuple((name.replace("_", "-"), value) for name, value in attrs.items())
    return Node(tag, cls, named, tuple(flat))


def to_html(node: Node | Markup | str) -> str:
    """The node as HTML: every text and attribute value escaped, styles inline."""
    out: list[str] = []
    _write(node, out)
    return "".join(out)


def _write(node: Node | Markup | str, out: list[str]) -> None:
    if isinstance(node, str):
        out.append(html.escape(node, quote=False))
        return
    if isinstance(node, Markup):
        out.append(node.html)
        return
    classes = node.cls.split()
    style = ";".join(STYLES[c] for c in classes if c in STYLES)
    kept = " ".join(c for c in classes if c in KEPT_CLASSES or c not in STYLES)
    attrs = "".join(
        f" {name}" if name in BOOLEAN_ATTRIBUTES else f' {name}="{html.escape(value)}"'
        for name, value in (*node.attrs, ("class", kept), ("style", style))
        if value
    )
    out.append(f"<{node.tag}{attrs}>")
    for child in node.children:
        _write(child, out)
    if node.tag not in ("img", "br"):
        out.append(f"</{node.tag}>")
