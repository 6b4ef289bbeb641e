"""The Diff tab's model as renderable parts: what a saved notebook shows of a diff.

Reads only the model (`contracts.DiffPane`, built by `views/diffmodel.py`) that the
widget's Diff tab draws too: the summary line, the figures by group, and each IR's
two sides in one table (a's line, source and text; b's line, source and text),
changed rows tinted.
"""

from __future__ import annotations

from pallaslab._src.views import highlight
from pallaslab._src.views.contracts import DiffGroup, DiffIr, DiffPane, DiffRow, DiffSource
from pallaslab._src.views.statichtml.nodes import STYLES, Node, h


def diff(model: DiffPane) -> list[Node]:
    """The Diff tab: summary, figures that matter, IRs side by side, notes."""
    kernel = (
        model["aKernel"]
        if model["aKernel"] == model["bKernel"]
        else f"{model['aKernel']} \u2192 {model['bKernel']}"
    )
    parts: list[Node] = [
        h(
            "p",
            "pl-diff-summary" + (f" pl-diff-{model['verdict']}" if model["verdict"] else ""),
            model["summary"],
        ),
        h(
            "p",
            "pl-facts",
            f"a: {model['aName']} \u00b7 b: {model['bName']} \u00b7 kernel {kernel} "
            f"\u00b7 figures for {model['chip']}",
        ),
    ]
    parts += [_group(g) for g in model["groups"] if g["figures"] or g["unchanged"]]
    parts += [_ir(ir) for ir in model["irs"]]
    parts += [h("p", "pl-notice", f"Note: {n}") for n in model["notes"]]
    return parts


def _group(group: DiffGroup) -> Node:
    rows = [
        h(
            "tr",
            "pl-diff-figure" + ("" if figure["changed"] else " pl-diff-same"),
            h("td", "pl-td", figure["name"]),
            h("td", "pl-td", figure["a"]),
            h("td", "pl-td", figure["b"]),
            h(
                "td",
                "pl-td",
                h("span", f"pl-diff-{figure['verdict']}", figure["change"])
                if figure["verdict"]
                else figure["change"],
                h("span", "pl-small", f" ({figure['note']})") if figure["note"] else None,
            ),
        )
        for figure in group["figures"]
    ]
    unchanged = group["unchanged"]
    return h(
        "div",
        "pl-diff-group",
        h("h5", "pl-diff-group-title", group["title"]),
        h(
            "table",
            "pl-table pl-diff-figures",
            h("tr", "", [h("th", "pl-th", x) for x in ("figure", "a", "b", "change")]),
            rows,
        )
        if rows
        else None,
        h("p", "pl-facts", f"{unchanged} unchanged") if unchanged and not rows else None,
        h("p", "pl-facts", f"and {unchanged} unchanged") if unchanged and rows else None,
    )


def _ir(ir: DiffIr) -> Node:
    title = h("summary", "pl-summary", h("b", "", ir["description"]))
    if ir["aError"] or ir["bError"] or not ir["rows"]:
        return h("details", "pl-diff-ir", title)
    head = h(
        "tr",
        "",
        [h("th", "pl-th", x) for x in ("a", "source", ir["aTarget"], "b", "source", ir["bTarget"])],
    )
    rows = [_row(row, ir["language"]) for row in ir["rows"]]
    if ir["more"]:
        rows.append(
            h(
                "tr",
                "pl-diff-gap",
                h(
                    "td",
                    "pl-td pl-facts",
                    f"\u2026 {ir['more']} more changed lines: diff.to_frame('lines') has every row",
                    colspan="6",
                ),
            )
        )
    return h(
        "details",
        "pl-diff-ir",
        title,
        h("table", "pl-table pl-diff-lines", head, rows),
        open="open",
    )


def _row(row: DiffRow, language: str) -> Node:
    if row["op"] == "gap":
        count = row["hidden"]
        return h(
            "tr",
            "pl-diff-gap",
            h(
                "td",
                "pl-td pl-facts",
                f"\u2026 {count} equal line{'' if count == 1 else 's'}",
                colspan="6",
            ),
        )
    op = row["op"]
    a_tint = "pl-diff-old" if op in ("delete", "replace") else ""
    b_tint = "pl-diff-new" if op in ("insert", "replace") else ""
    return h(
        "tr",
        f"pl-diff-{op}",
        h("td", "pl-td pl-ln", "" if row["aLine"] is None else str(row["aLine"])),
        h("td", "pl-td pl-small", _sources(row["aSources"])),
        h("td", f"pl-td pl-diff-code {a_tint}", _code(row["aText"], language)),
        h("td", "pl-td pl-ln", "" if row["bLine"] is None else str(row["bLine"])),
        h("td", "pl-td pl-small", _sources(row["bSources"])),
        h("td", f"pl-td pl-diff-code {b_tint}", _code(row["bText"], language)),
    )


def _code(text: str, language: str) -> list[Node | str]:
    tokens = highlight.tokenize_lines([text], language)[0] if text else []
    return [h("span", f"pl-tok-{cls}", t) if f"pl-tok-{cls}" in STYLES else t for cls, t in tokens]


def _sources(found: list[DiffSource]) -> list[Node | str]:
    parts: list[Node | str] = []
    for k, source in enumerate(found):
        if k:
            parts.append(", ")
        where = f"{source['label']}:{source['line']}"
        parts.append(h("span", "", where, title=source["text"]) if source["text"] else where)
    return parts
