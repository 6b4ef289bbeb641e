"""The Tiles tab: which block of each operand every program reads and writes.

Each operand is drawn as its array cut into blocks, shaded by how many programs read
(or write) each element; hovering or scrubbing a program lights its blocks up in
every operand; a play button steps through the programs in the backend's order.
Below: figures of merit against a chosen chip, and, for one chosen program, the
element-level loads and stores its body makes (requested from Python on demand).
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from pallaslab._src.base import messages
from pallaslab._src.geometry.tilemap import TileMap, shown_dims
from pallaslab._src.records import Kernel
from pallaslab._src.views import tilesdata
from pallaslab._src.views.tabs import Payload, Tab

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

# Colours per role (light, dark), shared with static/tabs/tiles.js.
ROLE_COLOURS = {
    "in": ("#dbe9fb", "#0b4da2"),
    "out": ("#fde4cf", "#a3400a"),
    "prefetch": ("#eadcf8", "#5a2e9c"),
}
UNREAD = "#f6f8fa"
# The static picture merges cells beyond this many per side (few SVG nodes).
_STATIC_CELLS = 32
# Kernels whose blocks vary over more programs than this get no static picture (it is
# made at display time, and counting millions of blocks takes seconds).
STATIC_MAX_BLOCKS = 1 << 20


def payload(inspection: Inspection) -> Payload:
    """The Tiles tab's data (see `tilesdata.payload`)."""
    return tilesdata.payload(inspection)


def respond(inspection: Inspection, body: dict[str, Any]) -> Payload:
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


# ---------------------------------------------------------------------------------
# Static HTML: an SVG per operand with the first program's blocks, and the figures.


def _shade(role: str, count: int, peak: int) -> str:
    if count <= 0:
        return UNREAD
    light, dark = ROLE_COLOURS.get(role, ("#e6e6e6", "#333333"))
    # Read once: a quarter of the way to the darkest shade, kept for the busiest.
    t = 0.25 + 0.6 * ((count - 1) / (peak - 1) if peak > 1 else 0.0)
    mix = [
        round(int(light[i : i + 2], 16) * (1 - t) + int(dark[i : i + 2], 16) * t) for i in (1, 3, 5)
    ]
    return "#" + "".join(f"{v:02x}" for v in mix)


def operand_svg(tiles: TileMap, index: int, program: tuple[int, ...], width: int = 240) -> str:
    """An operand's blocks as a small SVG (few nodes), `program`'s block outlined."""
    entry = tiles.operands[index]
    operand = entry.operand
    rows, cols, sliced = shown_dims(operand)
    block = tiles.block(index, program)
    coverage = tiles.coverage(index)
    row_edges, col_edges, counts = coverage.plane(rows, cols, {d: block[d][0] for d in sliced})
    row_edges, counts = tilesdata.merge_cells(row_edges, counts, 0, _STATIC_CELLS)
    col_edges, counts = tilesdata.merge_cells(col_edges, counts, 1, _STATIC_CELLS)
    n_rows = int(row_edges[-1])
    n_cols = int(col_edges[-1])
    (r0, r1) = block[rows] if rows is not None else (0, 1)
    (c0, c1) = block[cols] if cols is not None else (0, 1)
    lo_r, hi_r = min(0, r0), max(n_rows, r1)
    lo_c, hi_c = min(0, c0), max(n_cols, c1)
    scale_x = width / (hi_c - lo_c)
    height = 24 if rows is None else max(24, min(240, round((hi_r - lo_r) * scale_x)))
    scale_y = height / (hi_r - lo_r)
    role = "prefetch" if operand.scalar_prefetch else operand.role
    peak = max(coverage.max, 1)

    def x(v: float) -> float:
        return round((v - lo_c) * scale_x, 2)

    def y(v: float) -> float:
        return round((v - lo_r) * scale_y, 2)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(operand.label)}">',
        '<defs><pattern id="pl-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#cf222e" '
        'stroke-width="2"/></pattern></defs>',
    ]
    # One rectangle per run of equal counts in a row; block boundaries as one path.
    for i in range(len(row_edges) - 1):
        j = 0
        while j < len(col_edges) - 1:
            end = j + 1
            while end < len(col_edges) - 1 and counts[i, end] == counts[i, j]:
                end += 1
            parts.append(
                f'<rect x="{x(col_edges[j])}" y="{y(row_edges[i])}" '
                f'width="{round(x(col_edges[end]) - x(col_edges[j]), 2)}" '
                f'height="{round(y(row_edges[i + 1]) - y(row_edges[i]), 2)}" '
                f'fill="{_shade(role, int(counts[i, j]), peak)}"/>'
            )
            j = end
    # Boundaries closer than 3 pixels would only grey the picture out.
    lines = []
    if width / max(len(col_edges) - 1, 1) >= 3:
        lines += [f"M{x(c)} {y(0)}V{y(n_rows)}" for c in col_edges[1:-1]]
    if height / max(len(row_edges) - 1, 1) >= 3:
        lines += [f"M{x(0)} {y(r)}H{x(n_cols)}" for r in row_edges[1:-1]]
    if lines:
        parts.append(f'<path d="{"".join(lines)}" stroke="#ffffff" stroke-width="0.75"/>')
    inside = (max(r0, 0), min(r1, n_rows), max(c0, 0), min(c1, n_cols))
    if (r0, r1, c0, c1) != inside:
        parts.append(
            f'<rect x="{x(c0)}" y="{y(r0)}" width="{x(c1) - x(c0)}" height="{y(r1) - y(r0)}" '
            'fill="url(#pl-hatch)" stroke="#cf222e" stroke-dasharray="3,2"/>'
        )
    if inside[1] > inside[0] and inside[3] > inside[2]:
        # At least 3 pixels each way, so a one-row block still shows.
        w = max(x(inside[3]) - x(inside[2]), 3)
        h = max(y(inside[1]) - y(inside[0]), 3)
        parts.append(
            f'<rect x="{x(inside[2])}" y="{y(inside[0])}" width="{round(w, 2)}" '
            f'height="{round(h, 2)}" fill="#ffd33d" fill-opacity="0.7" '
            'stroke="#111111" stroke-width="1.5"/>'
        )
    parts.append(
        f'<rect x="{x(0)}" y="{y(0)}" width="{x(n_cols) - x(0)}" height="{y(n_rows) - y(0)}" '
        'fill="none" stroke="#59636e"/></svg>'
    )
    return "".join(parts)


def _kernel_html(tiles: TileMap, data: dict[str, Any]) -> str:
    program = tiles.program_at(0)
    grid = " x ".join(map(str, tiles.grid)) or "()"
    parts = [
        f"<h4>{html.escape(tiles.kernel.name)} <small>grid ({html.escape(grid)}), "
        f"{tiles.num_programs} programs; program {html.escape(str(program))} highlighted"
        "</small></h4>",
        f"<p class='pl-notice'>{html.escape(data['order'][tiles.schedule])}</p>",
        "<div style='display:flex;flex-wrap:wrap;gap:12px'>",
    ]
    for k, operand in enumerate(data["operands"]):
        if not operand["mapped"] or operand["access"] not in ("pipelined", "prefetch"):
            continue
        where = ", ".join(f"{a}:{b}" for a, b in tiles.ranges(k, program))
        parts.append(
            "<figure style='margin:0'>"
            + operand_svg(tiles, k, program)
            + f"<figcaption>{html.escape(operand['label'])} ({html.escape(operand['role'])}) "
            f"{html.escape(operand['type'])}, block {html.escape(operand['block'])}: "
            f"[{html.escape(where)}]</figcaption></figure>"
        )
    parts.append("</div>")
    figures = data["merit"][tiles.schedule]
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                o["label"],
                o["role"],
                " / ".join(map(str, o["reads"])),
                o["transfers"],
                o["bytesText"],
                o["minBytesText"],
                f"{o['ratio']}x",
            )
        )
        + "</tr>"
        for o in figures["operands"]
        if o["access"] in ("pipelined", "prefetch")
    )
    parts.append(
        "<table><tr><th>operand</th><th>role</th><th>reads min / mean / max</th>"
        "<th>copies</th><th>HBM bytes</th><th>minimum</th><th>ratio</th></tr>"
        f"{rows}</table>"
    )
    fit = next(
        f for f in data["fits"][tiles.schedule] if f["chip"] == data["defaultChip"][tiles.schedule]
    )
    facts = [
        f"HBM traffic {figures['bytesText']} ({figures['ratio']}x the minimum "
        f"{figures['minBytesText']})",
        f"working set per program {figures['workingSetText']} of {fit['capacityText']} "
        f"{fit['capacityName']} on {fit['chip']}",
    ]
    if figures["intensity"] is not None:
        facts.append(
            f"{figures['flopsText']}, {figures['intensity']} FLOP/byte: {fit['bound']}-bound on "
            f"{fit['chip']} (ridge {fit['ridge']}), at least {fit['secondsText']}"
        )
    parts.append("<p>" + html.escape("; ".join(facts)) + ".</p>")
    parts.extend(f"<p class='pl-notice'>{html.escape(n)}</p>" for n in data["notices"])
    return "".join(parts)


def _blocks_at_most(kernel: Kernel) -> int:
    """An upper bound on the distinct blocks of an operand: the programs its map reads."""
    return max(
        (
            math.prod(kernel.grid[a] for a in o.index_map.grid_args_used())
            for o in kernel.operands
            if o.index_map is not None and o.index_map.evaluable
        ),
        default=1,
    )


def _kernel_section(inspection: Inspection, index: int, name: str) -> str:
    kernel = inspection.kernels[index]
    if _blocks_at_most(kernel) > STATIC_MAX_BLOCKS:
        # Seconds of counting at display time, for a picture only saved notebooks show.
        return (
            f"<p class='pl-notice'>{html.escape(name)}: {kernel.num_programs:,} programs, "
            "each with blocks of its own; the Tiles tab draws them when opened (not kept in "
            "saved notebooks).</p>"
        )
    try:
        tiles, data = tilesdata.kernel_data(inspection, index)
    except (ValueError, IndexError) as error:
        return f"<p>{html.escape(name)}: {html.escape(messages.error_text(error))}</p>"
    if not any(t.access in ("pipelined", "prefetch") and t.operand.shape for t in tiles.operands):
        return f"<p>{html.escape(name)}: no blocks to draw.</p>"
    return _kernel_html(tiles, data)


def static_html(inspection: Inspection) -> str:
    """The Tiles tab as HTML: inline SVG pictures and the figures of merit."""
    parts = [_kernel_section(inspection, k.index, k.name) for k in inspection.kernels]
    return "".join(parts) or "<p>No Pallas kernels found.</p>"


TAB = Tab("tiles", "Tiles", payload, static_html, eager=False, order=35, respond=respond)
