"""The Tiles tab's Mosaic GPU part as saved notebooks show it (the widget: `mosaic.ts`)."""

from __future__ import annotations

from pallaslab._src.views.contracts import MosaicGpuModel
from pallaslab._src.views.statichtml.nodes import Node, h


def _table(headings: list[str], rows: list[list[str]]) -> Node:
    return h(
        "table",
        "pl-table",
        h("tr", "", [h("th", "pl-th", x) for x in headings]),
        [h("tr", "", [h("td", "pl-td", c) for c in row]) for row in rows],
    )


def _missing(text: str) -> list[Node]:
    return [h("p", "pl-notice", text)] if text else []


def mosaic(model: MosaicGpuModel) -> list[Node]:
    """Shared memory per chip, pipelines, copies and products of a Mosaic GPU kernel."""
    smem = model["smem"]
    parts: list[Node] = [
        h("h4", "pl-kernel-name", "Mosaic GPU"),
        h(
            "p",
            "pl-facts",
            f"{model['ctas']} CTAs ({' x '.join(map(str, model['grid']))}); work "
            f"{model['work']['flopsText']}, {model['work']['bytesText']} between GMEM and "
            "the chip" + ("" if model["work"]["exact"] else " (estimate)"),
        ),
    ]
    if model["persistent"]:
        parts.append(h("p", "", model["persistent"]))
    parts.append(h("p", "", smem["summary"]))
    for chip in smem["chips"]:
        verdict = (
            f"{round(chip['share'] * 100, 1)}% of {chip['limitText']}"
            if chip["fits"]
            else f"over the {chip['limitText']} one block may use"
        )
        note = f" {chip['note']}" if chip["note"] else ""
        parts.append(
            h("p", "pl-problem" if not chip["fits"] else "", f"{chip['chip']}: {verdict}.{note}")
        )
    parts.append(
        _table(
            ["allocation", "kind", "shape", "transforms", "SMEM", "line"],
            [
                [
                    r["label"],
                    r["kind"],
                    r["shape"] + (f" (stored {r['stored']})" if r["stored"] else ""),
                    r["transforms"],
                    r["bytesText"],
                    r["line"],
                ]
                for r in smem["rows"]
            ],
        )
    )
    for p in model["pipelines"]:
        at = f" at {p['line']}" if p["line"] else ""
        parts.append(
            h(
                "p",
                "",
                f"{p['kind']}{at}: {p['steps']} steps per run, "
                f"{p['slots']} slots per operand, {p['runs']} runs per CTA",
            )
        )
        parts.append(
            _table(
                ["operand", "window per step", "transforms", "SMEM (all slots)"],
                [
                    [b["operand"], b["window"], b["transforms"], b["bytesText"]]
                    for b in p["buffers"]
                ],
            )
        )
    parts += _missing(model["pipelinesMissing"])
    if model["copies"]:
        parts.append(
            _table(
                ["copy", "GMEM operand", "SMEM buffer", "window", "copies", "GMEM bytes", "line"],
                [
                    [
                        c["kind"],
                        c["operand"],
                        c["smem"],
                        c["window"],
                        str(c["copies"]),
                        c["totalText"],
                        c["line"],
                    ]
                    for c in model["copies"]
                ],
            )
        )
    parts += _missing(model["copiesMissing"])
    if model["mmas"]:
        parts.append(
            _table(
                ["product", "m x n x k", "dtypes", "layout", "runs", "FLOPs", "line"],
                [
                    [
                        m["kind"],
                        m["shape"],
                        m["dtypes"],
                        m["layout"],
                        str(m["count"]),
                        m["flopsText"],
                        m["line"],
                    ]
                    for m in model["mmas"]
                ],
            )
        )
    parts += _missing(model["mmasMissing"])
    parts += [h("p", "pl-notice", n) for n in model["notices"]]
    return parts
