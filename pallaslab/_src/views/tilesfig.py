"""The one static picture of a tile map: saved notebooks and `TileMap.save` draw it.

The widget draws tile maps interactively on a canvas (`labextension/src/widget/
tabs/tiles/`); everything static is drawn here, from the same view model
(`tilesdata.kernel_json`): each operand's array cut into its blocks, shaded by how
many programs read (or write) each element, one program's blocks outlined, and the
part of an edge block hanging over the array hatched. A picture is a list of
rectangles, lines and labels (`Picture`), written as SVG (the static HTML, `.svg`
files) or replayed onto a matplotlib figure (`.png`, `.pdf`).
"""

from __future__ import annotations

import base64
import dataclasses
import html
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pallaslab._src.views import tilesdata
from pallaslab._src.views.contracts import TILE_COLOURS, TilesKernel, TilesOperand

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from pallaslab._src.geometry.tilemap import TileMap

# The colours the widget's canvas uses too (contracts.TILE_COLOURS).
UNREAD = str(TILE_COLOURS["unread"])
HIGHLIGHT = str(TILE_COLOURS["highlight"])
OUTLINE = str(TILE_COLOURS["outline"])
PADDING = str(TILE_COLOURS["padding"])
BORDER = str(TILE_COLOURS["border"])
# A static picture merges cells beyond this many per side (few shapes).
MAX_CELLS = 32
# Block boundaries closer than this many pixels would only grey the picture out.
MIN_GAP = 3


@dataclasses.dataclass(frozen=True)
class Rect:
    """A rectangle, in pixels from the top left."""

    x: float
    y: float
    width: float
    height: float
    fill: str = "none"
    stroke: str = ""
    stroke_width: float = 1.0
    dashed: bool = False
    opacity: float = 1.0
    hatched: bool = False


@dataclasses.dataclass(frozen=True)
class Picture:
    """One operand's picture: rectangles, block boundaries, and its caption."""

    width: int
    height: int
    rects: tuple[Rect, ...]
    #: Block boundaries, as (x0, y0, x1, y1) segments in white.
    lines: tuple[tuple[float, float, float, float], ...]
    caption: str
    label: str


def shade(role: str, count: int, peak: int) -> str:
    """The colour of a cell read (or written) by `count` programs, `peak` the most."""
    if count <= 0:
        return UNREAD
    light, dark = TILE_COLOURS.get(role, TILE_COLOURS["other"])
    # Read once: a quarter of the way to the darkest shade, kept for the busiest.
    t = 0.25 + 0.6 * ((count - 1) / (peak - 1) if peak > 1 else 0.0)
    mix = [
        round(int(light[i : i + 2], 16) * (1 - t) + int(dark[i : i + 2], 16) * t) for i in (1, 3, 5)
    ]
    return "#" + "".join(f"{v:02x}" for v in mix)


def block_of(operand: TilesOperand, position: Sequence[int]) -> list[tuple[int, int]]:
    """Per dimension, the (start, stop) of a program's block, unclipped.

    `position` is the program's grid index among those the model holds (sampled).
    """
    spans = []
    for start, extent in zip(operand["starts"], operand["extents"], strict=True):
        first = _at(tilesdata.decode(start), position)
        spans.append((first, first + _at(tilesdata.decode(extent), position)))
    return spans


def _at(values: np.ndarray, position: Sequence[int]) -> int:
    # Arrays are kept only along the grid axes they vary on (length 1 elsewhere).
    index = tuple(p if n > 1 else 0 for p, n in zip(position, values.shape, strict=False))
    return int(values[index]) if values.ndim else int(values)


def _plane(operand: TilesOperand, at: dict[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row edges, column edges and counts through element `at[d]` of the cut dims."""
    coverage = operand["coverage"]
    edges = [tilesdata.decode(e) for e in coverage["edges"]]
    counts = tilesdata.decode(coverage["counts"])
    rows, cols = operand["dims"]["rows"], operand["dims"]["cols"]
    index = tuple(
        slice(None)
        if d in (rows, cols)
        else max(0, int(np.searchsorted(edges[d], at.get(d, 0), side="right")) - 1)
        for d in range(len(edges))
    )
    plane = np.asarray(counts[index])
    row_edges = edges[rows] if rows is not None else np.array([0, 1])
    col_edges = edges[cols] if cols is not None else np.array([0, 1])
    return row_edges, col_edges, plane.reshape(len(row_edges) - 1, len(col_edges) - 1)


def operand_picture(
    operand: TilesOperand, block: Sequence[tuple[int, int]], width: int = 240
) -> Picture:
    """An operand's blocks, `block` (a program's) outlined, in a `width`-pixel picture."""
    rows, cols, sliced = (
        operand["dims"]["rows"],
        operand["dims"]["cols"],
        operand["dims"]["sliced"],
    )
    at = {d: block[d][0] for d in sliced}
    row_edges, col_edges, counts = _plane(operand, at)
    row_edges, counts = tilesdata.merge_cells(row_edges, counts, 0, MAX_CELLS)
    col_edges, counts = tilesdata.merge_cells(col_edges, counts, 1, MAX_CELLS)
    n_rows, n_cols = int(row_edges[-1]), int(col_edges[-1])
    r0, r1 = block[rows] if rows is not None else (0, 1)
    c0, c1 = block[cols] if cols is not None else (0, 1)
    lo_r, hi_r = min(0, r0), max(n_rows, r1)
    lo_c, hi_c = min(0, c0), max(n_cols, c1)
    scale_x = width / (hi_c - lo_c)
    height = 24 if rows is None else max(24, min(240, round((hi_r - lo_r) * scale_x)))
    scale_y = height / (hi_r - lo_r)
    peak = max(operand["coverage"]["max"], 1)

    def x(v: float) -> float:
        return round((v - lo_c) * scale_x, 2)

    def y(v: float) -> float:
        return round((v - lo_r) * scale_y, 2)

    rects = []
    # One rectangle per run of equal counts in a row.
    for i in range(len(row_edges) - 1):
        j = 0
        while j < len(col_edges) - 1:
            end = j + 1
            while end < len(col_edges) - 1 and counts[i, end] == counts[i, j]:
                end += 1
            rects.append(
                Rect(
                    x(col_edges[j]),
                    y(row_edges[i]),
                    round(x(col_edges[end]) - x(col_edges[j]), 2),
                    round(y(row_edges[i + 1]) - y(row_edges[i]), 2),
                    fill=shade(operand["role"], int(counts[i, j]), peak),
                )
            )
            j = end
    lines: list[tuple[float, float, float, float]] = []
    if width / max(len(col_edges) - 1, 1) >= MIN_GAP:
        lines += [(x(c), y(0), x(c), y(n_rows)) for c in col_edges[1:-1]]
    if height / max(len(row_edges) - 1, 1) >= MIN_GAP:
        lines += [(x(0), y(r), x(n_cols), y(r)) for r in row_edges[1:-1]]
    inside = (max(r0, 0), min(r1, n_rows), max(c0, 0), min(c1, n_cols))
    if (r0, r1, c0, c1) != inside:
        rects.append(
            Rect(
                x(c0),
                y(r0),
                round(x(c1) - x(c0), 2),
                round(y(r1) - y(r0), 2),
                stroke=PADDING,
                dashed=True,
                hatched=True,
            )
        )
    if inside[1] > inside[0] and inside[3] > inside[2]:
        # At least 3 pixels each way, so a one-row block still shows.
        rects.append(
            Rect(
                x(inside[2]),
                y(inside[0]),
                round(max(x(inside[3]) - x(inside[2]), 3), 2),
                round(max(y(inside[1]) - y(inside[0]), 3), 2),
                fill=HIGHLIGHT,
                opacity=0.7,
                stroke=OUTLINE,
                stroke_width=1.5,
            )
        )
    rects.append(
        Rect(x(0), y(0), round(x(n_cols) - x(0), 2), round(y(n_rows) - y(0), 2), stroke=BORDER)
    )
    shape = operand["shape"]
    ranges = ", ".join(
        f"{min(max(a, 0), n)}:{min(max(b, 0), n)}" for (a, b), n in zip(block, shape, strict=True)
    )
    cut = "".join(f", dim {d} at {at[d]}" for d in sliced)
    caption = (
        f"{operand['label']} ({operand['role']}) {operand['type']}, block {operand['block']}: "
        f"[{ranges}]{cut}"
    )
    return Picture(width, height, tuple(rects), tuple(lines), caption, operand["label"])


def drawn(kernel: TilesKernel) -> list[TilesOperand]:
    """The operands worth a picture: inputs and outputs whose blocks are known."""
    return [
        o
        for o in kernel["operands"]
        if o["mapped"] and o["access"] in ("pipelined", "prefetch") and "starts" in o
    ]


# ---------------------------------------------------------------------------------
# SVG: saved notebooks and `.svg` files.


def svg(picture: Picture, *, standalone: bool = False) -> str:
    """The picture as SVG (every text escaped); `standalone` adds the XML prolog."""
    w, h = picture.width, picture.height
    parts = [
        "<?xml version='1.0' encoding='UTF-8'?>\n" if standalone else "",
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img" aria-label="{html.escape(picture.label)}">',
    ]
    if any(r.hatched for r in picture.rects):
        parts.append(
            '<defs><pattern id="pl-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="{PADDING}" '
            'stroke-width="2"/></pattern></defs>'
        )
    border = picture.rects[-1]
    parts += [_svg_rect(r) for r in picture.rects[:-1] if not (r.stroke or r.hatched)]
    if picture.lines:
        path = "".join(f"M{a} {b}L{c} {d}" for a, b, c, d in picture.lines)
        parts.append(f'<path d="{path}" stroke="#ffffff" stroke-width="0.75"/>')
    parts += [_svg_rect(r) for r in picture.rects[:-1] if r.stroke or r.hatched]
    parts.append(_svg_rect(border))
    parts.append("</svg>")
    return "".join(parts)


def _svg_rect(r: Rect) -> str:
    fill = "url(#pl-hatch)" if r.hatched else r.fill
    attrs = f'x="{r.x}" y="{r.y}" width="{r.width}" height="{r.height}" fill="{fill}"'
    if r.opacity < 1:
        attrs += f' fill-opacity="{r.opacity}"'
    if r.stroke:
        attrs += f' stroke="{r.stroke}"'
        if r.stroke_width != 1:
            attrs += f' stroke-width="{r.stroke_width}"'
        if r.dashed:
            attrs += ' stroke-dasharray="3,2"'
    return f"<rect {attrs}/>"


def svg_uri(text: str) -> str:
    """An SVG as a `data:` URI, for an `<img>`.

    Front ends that sanitize HTML (an untrusted notebook) keep images, not inline SVG.
    """
    return "data:image/svg+xml;base64," + base64.b64encode(text.encode()).decode()


# ---------------------------------------------------------------------------------
# A whole tile map: `TileMap.save` and `TileMap.figure`.


def map_pictures(
    tiles: TileMap, program: Sequence[int] | None = None, width: int = 240
) -> tuple[list[Picture], str]:
    """Every drawn operand's picture, `program`'s blocks lit (default: the first).

    Returns:
        The pictures and a title.
    """
    chosen = tiles.program_at(tiles.position(program) if program is not None else 0)
    kernel = tilesdata.kernel_json(tiles)
    pictures = []
    for operand in drawn(kernel):
        block = [(int(a), int(b)) for a, b in tiles.block(operand["index"], chosen)]
        pictures.append(operand_picture(operand, block, width))
    if not pictures:
        raise ValueError(f"kernel {tiles.kernel.name} has no mapped inputs or outputs to draw")
    grid = " x ".join(map(str, tiles.grid)) or "()"
    shown = "(" + ", ".join(map(str, chosen)) + ("," if len(chosen) == 1 else "") + ")"
    return pictures, f"{tiles.kernel.name}: grid ({grid}), program {shown} highlighted"


def map_svg(pictures: Sequence[Picture], title: str, gap: int = 24) -> str:
    """The pictures side by side under a title, captions below: one SVG document."""
    top, caption_height = 28, 36
    width = sum(p.width for p in pictures) + gap * (len(pictures) + 1)
    height = top + max(p.height for p in pictures) + caption_height
    parts = [
        "<?xml version='1.0' encoding='UTF-8'?>\n",
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{gap}" y="18" font-size="13">{html.escape(title)}</text>',
    ]
    x = gap
    for picture in pictures:
        inner = svg(picture).replace("<svg ", f'<svg x="{x}" y="{top}" ', 1)
        parts.append(inner)
        parts.append(
            f'<text x="{x}" y="{top + picture.height + 16}" font-size="9">'
            f"{html.escape(picture.caption)}</text>"
        )
        x += picture.width + gap
    parts.append("</svg>")
    return "".join(parts)


def figure(
    tiles: TileMap,
    program: Sequence[int] | None = None,
    *,
    title: str | None = None,
    panel_width: float = 3.4,
) -> Figure:
    """The tile map as a matplotlib figure (the same picture as the SVG).

    Args:
        tiles: The tile map.
        program: The program to highlight, as grid indices; None for the first.
        title: The figure's title (default: kernel, grid and program).
        panel_width: Width of one operand's panel, in inches.
    """
    from matplotlib.figure import Figure  # noqa: PLC0415 - only when drawing
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    pictures, default_title = map_pictures(tiles, program)
    dpi = 240 / panel_width
    height = max(p.height for p in pictures) / dpi + 0.9
    fig = Figure(figsize=(panel_width * len(pictures), height), layout="constrained")
    axes = fig.subplots(1, len(pictures), squeeze=False)[0]
    for ax, picture in zip(axes, pictures, strict=True):
        ax.set_xlim(0, picture.width)
        ax.set_ylim(picture.height, 0)  # row 0 at the top, as arrays print
        ax.set_aspect("equal")
        ax.axis("off")
        for r in [r for r in picture.rects[:-1] if not r.stroke] + [
            r for r in picture.rects if r.stroke
        ]:
            ax.add_patch(
                Rectangle(
                    (r.x, r.y),
                    r.width,
                    r.height,
                    facecolor="none" if r.fill == "none" or r.hatched else r.fill,
                    alpha=r.opacity if r.opacity < 1 else None,
                    edgecolor=r.stroke or "none",
                    linewidth=r.stroke_width if r.stroke else 0,
                    linestyle="--" if r.dashed else "-",
                    hatch="////" if r.hatched else None,
                )
            )
        for x0, y0, x1, y1 in picture.lines:
            ax.plot([x0, x1], [y0, y1], color="#ffffff", linewidth=0.5)
        ax.set_title(picture.caption.replace(", block ", "\nblock ", 1), fontsize=8)
    fig.suptitle(title if title is not None else default_title, fontsize=10)
    return fig


def save(
    tiles: TileMap, path: str | Path, program: Sequence[int] | None = None, **options: object
) -> Path:
    """Writes the tile map to `path`; the suffix picks the format (.png, .svg, .pdf)."""
    target = Path(path)
    suffix = target.suffix.lower().lstrip(".")
    if suffix not in ("png", "svg", "pdf", "jpg", "jpeg"):
        raise ValueError(f"save a tile map as .png, .svg or .pdf, not {target.name!r}")
    if suffix == "svg":
        pictures, default_title = map_pictures(tiles, program)
        title = options.get("title")
        target.write_text(
            map_svg(pictures, str(title) if title is not None else default_title),
            encoding="utf-8",
        )
        return target
    fig = figure(tiles, program, **options)  # type: ignore[arg-type]
    fig.savefig(target, format=suffix, dpi=150)
    return target
