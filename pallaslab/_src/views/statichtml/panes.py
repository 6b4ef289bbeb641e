"""Each tab's view model as renderable parts: what a saved notebook shows of it.

One function per tab, reading only the model (`views/contracts.py`) the widget
renders too; `RENDERERS` maps tab ids to them, and `summaries` gives each tab's
one-line summary for its folded section.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from pallaslab._src.views import heatmap, highlight, tilesfig
from pallaslab._src.views.contracts import (
    FitModel,
    HintsModel,
    IrStatic,
    JaxprPane,
    KernelModel,
    Location,
    Mark,
    OverviewPane,
    RunPane,
    SourcePane,
    TilesKernel,
    TilesKernelError,
    TilesPane,
)
from pallaslab._src.views.statichtml.mosaic import mosaic
from pallaslab._src.views.statichtml.nodes import STYLES, Node, h
from pallaslab._src.views.tabs.ir import MAX_LINE, STATIC_LINES

# ---------------------------------------------------------------------------------
# Shared parts.


def code(
    lines: Sequence[str],
    language: str,
    *,
    first: int = 1,
    marks: Sequence[Mark] = (),
    numbered: bool = True,
) -> Node:
    """A numbered, highlighted block of code, with marks at the ends of lines."""
    width = len(str(first + max(len(lines) - 1, 0)))
    marked = {m["line"]: m["text"] for m in marks}
    rows: list[Node | str] = []
    for offset, tokens in enumerate(highlight.tokenize_lines(list(lines), language)):
        number = first + offset
        if offset:
            rows.append("\n")
        if numbered:
            rows.append(h("span", "pl-ln", f"{number:>{width}}  "))
        rows += [
            h("span", f"pl-tok-{cls}", text) if f"pl-tok-{cls}" in STYLES else text
            for cls, text in tokens
        ]
        if number in marked:
            rows.append(h("span", "pl-mark", f"  \u2190 {marked[number]}"))
    return h("pre", "pl-code", rows)


def table(headings: Sequence[str], rows: Sequence[Sequence[Node | str]]) -> Node:
    """A table with a heading row."""
    return h(
        "table",
        "pl-table",
        h("tr", "", [h("th", "pl-th", x) for x in headings]),
        [h("tr", "", [h("td", "pl-td", c) for c in row]) for row in rows],
    )


def at(where: Location | None) -> str:
    """`Cell [3] line 7: ` (nothing without a location)."""
    return f"{where['label']} line {where['line']}: " if where else ""


def plural(count: int, word: str) -> str:
    """`1 kernel`, `2 kernels`."""
    return f"{count} {word}{'' if count == 1 else 's'}"


# ---------------------------------------------------------------------------------
# Kernels.


def overview(model: OverviewPane) -> list[Node]:
    """The Kernels tab: each kernel's facts, operands, races and hints."""
    parts: list[Node] = []
    program = model["program"]
    if program["args"] or program["outputs"]:
        args = ", ".join(f"{a['path']}: {a['type']}" for a in program["args"])
        outputs = ", ".join(o["type"] for o in program["outputs"])
        parts.append(h("p", "", h("b", "", program["name"]), f"({args}) \u2192 {outputs}"))
    if not model["kernels"]:
        parts.append(h("p", "", "No Pallas kernels found."))
    parts += [_kernel(k) for k in model["kernels"]]
    parts += [h("p", "pl-notice", n) for n in model["notices"]]
    return parts


def _kernel(kernel: KernelModel) -> Node:
    operands = table(
        ["role", "ref", "array", "block", "index map", "memory", "block bytes"],
        [
            [
                h("span", f"pl-role-{o['role']}", o["role"]),
                o["label"],
                o["type"],
                o["block"],
                h("code", "", o["indexMap"]),
                o["memory"] + (f" \u00d7{o['buffers']}" if o["buffers"] else ""),
                o["blockBytes"],
            ]
            for o in kernel["operands"]
        ],
    )
    races = [
        h(
            "p",
            "pl-warning" if entry["total"] else ("pl-clean" if entry["checked"] else "pl-facts"),
            sentence,
        )
        for entry in kernel["races"].values()
        for sentence in entry["sentences"]
    ]
    return h(
        "div",
        "",
        h("h4", "pl-kernel-name", kernel["name"]),
        h("p", "pl-facts", " \u00b7 ".join(kernel["facts"])),
        operands,
        [h("p", "pl-facts", line) for line in kernel["details"]],
        races,
        _fit(kernel["fit"]),
        _hints(kernel["hints"]),
    )


def _fit(fit: FitModel) -> Node | None:
    """Memory per chip, as the widget's table (a saved page cannot compile more)."""
    if not fit["rows"]:
        return h("p", "pl-notice", fit["error"]) if fit.get("error") else None
    rows = table(
        ["chip", "memory", "needed", "limit", "verdict", "vmem_limit_bytes"],
        [
            [
                row["chip"],
                row["memory"],
                (row["needed"] or "?")
                + (f" ({row['neededFrom']})" if row["neededFrom"] not in ("", "read") else ""),
                f"{row['limit']} of {row['capacity']}",
                h("span", f"pl-fit-{row['verdict']}", row["verdictText"]),
                f"{row['vmemLimitBytes']:,}" if row["vmemLimitBytes"] is not None else "",
            ]
            for row in fit["rows"]
        ],
    )
    note = (
        None
        if fit["compiled"]
        else h("p", "pl-small", "Estimated from the BlockSpecs where no compile was made.")
    )
    return h("div", "", h("h5", "", "Memory per chip"), rows, note)


def _hints(hints: HintsModel) -> Node | None:
    if not (hints["hints"] or hints.get("error")):
        return None
    items = [
        h(
            "li",
            f"pl-hint-{hint['severity']}",
            h("b", "", hint["severity"]),
            " ",
            h("span", "pl-hint-text", at(hint["location"]) + hint["message"]),
            " ",
            h("span", "pl-small", f"(assumes {hint['chip']})") if hint["chip"] else None,
        )
        for hint in hints["hints"]
    ]
    if hints.get("error"):
        items.append(h("li", "pl-notice", hints.get("error", "")))
    return h("div", "", h("h5", "", "Hints"), h("ul", "pl-hints", items))


def overview_summary(model: OverviewPane) -> str:
    """The kernels, by name and grid."""
    kernels = model["kernels"]
    if not kernels:
        return "no Pallas kernels"
    times = " \u00d7 "
    named = ", ".join(
        f"{k['name']} ({times.join(map(str, k['grid'])) or 'no grid'})" for k in kernels[:3]
    )
    return f"{plural(len(kernels), 'kernel')}: {named}" + (" \u2026" if len(kernels) > 3 else "")


# ---------------------------------------------------------------------------------
# Source and Jaxpr.


def source(model: SourcePane) -> list[Node]:
    """The Source tab: each window of source, kernel and BlockSpec lines marked."""
    if not model["files"]:
        return [h("p", "", "No source is available for these kernels.")]
    parts = []
    for window in model["files"]:
        parts.append(h("div", "pl-code-title", window["label"]))
        parts.append(code(window["lines"], "python", first=window["first"], marks=window["marks"]))
    return parts


def source_summary(model: SourcePane) -> str:
    """The files shown."""
    return ", ".join(f["label"] for f in model["files"]) or "no source"


def jaxpr(model: JaxprPane) -> list[Node]:
    """The Jaxpr tab: each jaxpr as the widget shows it inline (long ones clipped)."""
    if not model["views"]:
        return [h("p", "", "No jaxpr.")]
    parts = []
    for view in model["views"]:
        lines = view["text"].split("\n")
        parts.append(h("div", "pl-code-title", view["title"]))
        parts.append(code(lines, "jaxpr", numbered=False))
        more = view["lines"] - len(lines)
        if more > 0:
            parts.append(h("p", "pl-notice", f"\u2026 and {more} more lines."))
    return parts


def jaxpr_summary(model: JaxprPane) -> str:
    """How long each jaxpr is."""
    return ", ".join(f"{v['title']}: {plural(v['lines'], 'line')}" for v in model["views"])


# ---------------------------------------------------------------------------------
# Tiles.


def tiles(model: TilesPane) -> list[Node]:
    """The Tiles tab: the first program's blocks in every operand, figures of merit."""
    if not model["kernels"]:
        return [h("p", "", "No Pallas kernels found.")]
    parts: list[Node] = []
    for kernel in model["kernels"]:
        if "error" in kernel:
            failed = cast(TilesKernelError, kernel)
            parts.append(h("p", "pl-notice", f"{failed['name']}: {failed['error']}"))
        else:
            parts += _tiles_kernel(kernel)
    return parts


MERIT_HEADINGS = (
    "operand",
    "role",
    "reads min / mean / max",
    "copies",
    "HBM bytes",
    "minimum",
    "ratio",
)


def _tiles_kernel(kernel: TilesKernel) -> list[Node]:
    drawn = tilesfig.drawn(kernel)
    extra = [
        *(mosaic(kernel["mosaic"]) if "mosaic" in kernel else ()),
        *[h("p", "pl-notice", kernel[k]) for k in ("mosaicError",) if k in kernel],
    ]
    if not any(o["shape"] for o in drawn):
        return [h("p", "", f"{kernel['name']}: no blocks to draw."), *extra]
    schedule = kernel["schedule"]
    first = [0] * len(kernel["grid"])
    program = "(" + ", ".join(map(str, first)) + ("," if len(first) == 1 else "") + ")"
    grid = " x ".join(map(str, kernel["grid"])) or "()"
    pictures = []
    for operand in drawn:
        picture = tilesfig.operand_picture(operand, tilesfig.block_of(operand, first))
        pictures.append(
            h(
                "figure",
                "pl-figure",
                h("img", "", src=tilesfig.svg_uri(tilesfig.svg(picture)), alt=picture.label),
                h("figcaption", "pl-caption", picture.caption),
            )
        )
    merit = kernel["merit"][schedule]
    rows: list[list[Node | str]] = [
        [
            o["label"],
            o["role"],
            " / ".join(f"{r:g}" for r in o["reads"]),
            str(o["transfers"]),
            o["bytesText"],
            o["minBytesText"],
            f"{o['ratio']}x",
        ]
        for o in merit["operands"]
        if o["access"] in ("pipelined", "prefetch")
    ]
    chip = kernel["defaultChip"][schedule]
    fit = next(f for f in kernel["fits"][schedule] if f["chip"] == chip)
    facts = [
        f"HBM traffic {merit['bytesText']} ({merit['ratio']}x the minimum {merit['minBytesText']})",
        f"working set per program {merit['workingSetText']} of {fit['capacityText']} "
        f"{fit['capacityName']} on {fit['chip']}",
    ]
    if merit["intensity"] is not None:
        facts.append(
            f"{merit['flopsText']}, {merit['intensity']} FLOP/byte: {fit['bound']}-bound on "
            f"{fit['chip']} (ridge {fit['ridge']}), at least {fit['secondsText']}"
        )
    return [
        h(
            "h4",
            "pl-kernel-name",
            kernel["name"],
            " ",
            h(
                "span",
                "pl-small",
                f"grid ({grid}), {kernel['programs']} programs; program {program} highlighted",
            ),
        ),
        h("p", "pl-notice", kernel["order"][schedule]),
        h("div", "pl-pictures", pictures),
        table(MERIT_HEADINGS, rows),
        h("p", "", "; ".join(facts) + "."),
        *[h("p", "pl-notice", n) for n in kernel["notices"]],
        *extra,
    ]


def tiles_summary(model: TilesPane) -> str:
    """Each kernel's grid."""
    return ", ".join(
        f"{k['name']}: {plural(k['programs'], 'program')}"
        for k in model["kernels"]
        if "error" not in k
    )


# ---------------------------------------------------------------------------------
# IR.


def ir(model: IrStatic) -> list[Node]:
    """The IR tab: the lowerings done before the page was made, each cut short."""
    if not model["lowered"]:
        return [
            h(
                "p",
                "pl-notice",
                "Nothing lowered yet: choose a target in the IR tab, use ",
                h("code", "", "%%kernel ... --target ptx:sm_90"),
                ", or ",
                h("code", "", 'inspection.lower("ptx:sm_90")'),
                ".",
            )
        ]
    parts: list[Node] = []
    for done in model["lowered"]:
        summary = done["summary"]
        title = f"{summary['kernel'] or 'program'} \u00b7 {summary['key']['target']}"
        parts.append(h("h4", "pl-kernel-name", title))
        parts.append(h("p", "pl-notice", summary["header"]))
        parts += [h("p", "pl-notice", note) for note in summary["notes"]]
        error = summary["error"]
        if error is not None:
            where = error["where"]
            located = f"{where['label']} line {where['line']}: " if where else ""
            parts.append(h("div", "pl-problem", located + error["message"]))
            continue
        if summary["resources"] is not None:
            parts.append(h("p", "pl-facts", "Resources: " + summary["resources"]["summary"]))
        if summary["costs"]:
            files = model["pane"]["files"]
            parts.append(h("p", "pl-facts", summary["costNote"]))
            parts.append(
                table(
                    ["source line", "static cost"],
                    [
                        [f"{files[c['file']]['label']} line {c['line']}", c["text"]]
                        for c in summary["costs"]
                        if c["file"] < len(files)
                    ],
                )
            )
        lines = done["first"]["lines"][:STATIC_LINES] if done["first"] else []
        parts.append(code([line[:MAX_LINE] for line in lines], summary["language"]))
        more = summary["lines"] - len(lines)
        if more > 0:
            parts.append(h("p", "pl-notice", f"\u2026 {more} more lines"))
    return parts


def ir_summary(model: IrStatic) -> str:
    """The targets lowered for."""
    done = [d["summary"]["key"]["target"] for d in model["lowered"]]
    return ", ".join(dict.fromkeys(done)) or "nothing lowered yet"


# ---------------------------------------------------------------------------------
# Run.


def run(model: RunPane) -> list[Node]:
    """The Run tab: where it ran, what it found, the outputs and the check."""
    result = model["result"]
    if result is None:
        return [h("p", "", model["message"])]
    parts = [
        h(
            "p",
            "",
            "Ran on ",
            h("b", "", result["backend"]),
            f" ({result['mode']}) in {result['seconds']}.",
        )
    ]
    if result["note"]:
        parts.append(h("p", "pl-notice", result["note"]))
    if result["inputs"]:
        parts.append(h("p", "pl-facts", result["inputs"]))
    parts += [h("p", "pl-facts", n) for n in result["notices"]]
    for leak in result["leaks"]:
        parts.append(_finding(leak["title"], at(leak["where"]) + leak["text"]))
    for found in result["outOfBounds"]:
        parts.append(_finding("Out of bounds", at(found["where"]) + found["text"]))
    for check in result["raceChecks"]:
        if check["confirmed"]:
            parts.append(_finding(f"Race ({check['backend'].upper()})", check["text"]))
        else:
            parts.append(h("p", "pl-facts", check["text"]))
    for race in result["interpreterRaces"]:
        parts.append(_finding("Race (Mosaic GPU interpreter)", at(race["where"]) + race["text"]))
    parts.append(
        table(
            ["output", "type", "values", "min", "max", "NaN", "Inf"],
            [
                [
                    o["path"],
                    o["type"],
                    h("code", "", o["preview"]),
                    o["min"],
                    o["max"],
                    str(o["nan"]),
                    str(o["inf"]),
                ]
                for o in result["outputs"]
            ],
        )
    )
    comparison = result["comparison"]
    if comparison is not None:
        verdict = "pl-verdict-pass" if comparison["ok"] else "pl-verdict-fail"
        parts.append(
            h("p", verdict, h("b", "", comparison["verdict"]), ": " + comparison["detail"])
        )
        for tile in comparison["tiles"]:
            parts.append(h("p", "", tile["description"]))
            image = tilesfig.svg_uri(heatmap.static_svg(tile))
            parts.append(h("img", "", src=image, alt=tile["description"]))
            if tile["note"]:
                parts.append(h("p", "pl-notice", tile["note"]))
    return parts


def _finding(title: str, text: str) -> Node:
    return h("p", "pl-warning", f"{title} \u2014 {text}")


def run_summary(model: RunPane) -> str:
    """Where it ran and whether it matches."""
    result = model["result"]
    if result is None:
        return "not run"
    text = f"{result['backend']} ({result['mode']})"
    comparison = result["comparison"]
    findings = len(result["leaks"]) + len(result["outOfBounds"])
    findings += sum(c["confirmed"] for c in result["raceChecks"])
    findings += len(result["interpreterRaces"])
    if comparison is not None:
        text += f" \u00b7 {comparison['verdict']}"
    if findings:
        text += f" \u00b7 {plural(findings, 'finding')}"
    return text


# ---------------------------------------------------------------------------------

#: Per tab: its parts, and its one-line summary (the models are the tabs' own types).
RENDERERS: dict[str, tuple[Callable[[Any], list[Node]], Callable[[Any], str]]] = {
    "overview": (overview, overview_summary),
    "source": (source, source_summary),
    "jaxpr": (jaxpr, jaxpr_summary),
    "tiles": (tiles, tiles_summary),
    "ir": (ir, ir_summary),
    "run": (run, run_summary),
}
