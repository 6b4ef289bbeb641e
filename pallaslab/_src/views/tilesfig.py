"""Tile maps as matplotlib figures, for slides and course notes (`TileMap.save`).

One panel per input and output: the array cut into its blocks, shaded by how many
programs read (or write) each element, one program's blocks outlined, and the part
of an edge block hanging over the array hatched. Figures are made without pyplot,
so nothing touches the notebook's matplotlib state or backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pallaslab._src.geometry.tilemap import OperandTiles, TileMap, shown_dims
from pallaslab._src.views import fmt

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Role colours, shared with the widget (inputs blue, outputs orange).
ROLE_COLOURS = {"in": "Blues", "out": "Oranges", "prefetch": "Purples"}
HIGHLIGHT = "#111111"
HIGHLIGHT_FILL = "#ffd33d"
PADDING = "#cf222e"
# Draw block boundaries only while they stay readable.
_MAX_LINES = 64


def drawn_operands(tiles: TileMap) -> list[int]:
    """Operands worth a panel: inputs and outputs whose blocks are known."""
    return [
        k
        for k, t in enumerate(tiles.operands)
        if t.access == "pipelined" or (t.access == "prefetch" and t.operand.shape)
    ]


def figure(
    tiles: TileMap,
    program: Sequence[int] | None = None,
    *,
    title: str | None = None,
    panel_width: float = 3.4,
) -> Figure:
    """The tile map as a figure, with `program`'s blocks highlighted (default: the first).

    Args:
        tiles: The tile map.
        program: The program to highlight, as grid indices; None for the first.
        title: The figure's title (default: kernel, grid and program).
        panel_width: Width of one operand's panel, in inches.
    """
    from matplotlib.figure import Figure  # noqa: PLC0415 - only when drawing

    chosen = tiles.program_at(tiles.position(program) if program is not None else 0)
    shown = drawn_operands(tiles)
    if not shown:
        raise ValueError(f"kernel {tiles.kernel.name} has no mapped inputs or outputs to draw")
    strips = all(len(tiles.operands[k].operand.shape) <= 1 for k in shown)
    height = 1.6 if strips else panel_width + 0.6
    fig = Figure(figsize=(panel_width * len(shown), height), layout="constrained")
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    for ax, k in zip(axes, shown, strict=True):
        _panel(ax, tiles, k, chosen)
    grid = " x ".join(map(str, tiles.grid)) or "()"
    fig.suptitle(
        title
        if title is not None
        else f"{tiles.kernel.name}: grid ({grid}), program {_program_text(chosen)} highlighted",
        fontsize=10,
    )
    return fig


def save(
    tiles: TileMap, path: str | Path, program: Sequence[int] | None = None, **options: Any
) -> Path:
    """Writes `figure(...)` to `path`; the suffix picks the format (.png, .svg, .pdf)."""
    target = Path(path)
    suffix = target.suffix.lower().lstrip(".")
    if suffix not in ("png", "svg", "pdf", "jpg", "jpeg"):
        raise ValueError(f"save a tile map as .png, .svg or .pdf, not {target.name!r}")
    fig = figure(tiles, program, **options)
    fig.savefig(target, format=suffix, dpi=150)
    return target


def _program_text(program: Sequence[int]) -> str:
    return "(" + ", ".join(map(str, program)) + ("," if len(program) == 1 else "") + ")"


def _panel(ax: Axes, tiles: TileMap, index: int, program: tuple[int, ...]) -> None:
    entry: OperandTiles = tiles.operands[index]
    operand = entry.operand
    rows, cols, sliced = shown_dims(operand)
    block = tiles.block(index, program)
    at = {d: block[d][0] for d in sliced}
    coverage = tiles.coverage(index)
    row_edges, col_edges, counts = coverage.plane(rows, cols, at)
    role = "prefetch" if operand.scalar_prefetch else operand.role
    peak = max(int(coverage.max), 1)
    # The darkest shade is kept for more reads than any element has: text stays legible.
    mesh = ax.pcolormesh(
        col_edges, row_edges, counts, cmap=ROLE_COLOURS.get(role, "Greys"), vmin=0, vmax=peak * 1.6
    )
    cbar = ax.figure.colorbar(
        mesh, ax=ax, shrink=0.8, pad=0.02, ticks=sorted({0, *np.linspace(0, peak, 5).round()})
    )
    cbar.set_label("programs writing" if role == "out" else "programs reading", fontsize=7)
    cbar.ax.tick_params(labelsize=6)
    if len(col_edges) <= _MAX_LINES:
        ax.vlines(col_edges, row_edges[0], row_edges[-1], colors="white", linewidth=0.5)
    if len(row_edges) <= _MAX_LINES and rows is not None:
        ax.hlines(row_edges, col_edges[0], col_edges[-1], colors="white", linewidth=0.5)
    # The program's block, and what of it hangs over the array.
    (r0, r1) = block[rows] if rows is not None else (0, 1)
    (c0, c1) = block[cols] if cols is not None else (0, 1)
    n_rows = operand.shape[rows] if rows is not None else 1
    n_cols = operand.shape[cols] if cols is not None else 1
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    inside = (max(r0, 0), min(r1, n_rows), max(c0, 0), min(c1, n_cols))
    if inside[1] > inside[0] and inside[3] > inside[2]:
        ax.add_patch(
            Rectangle(
                (inside[2], inside[0]),
                inside[3] - inside[2],
                inside[1] - inside[0],
                facecolor=HIGHLIGHT_FILL,
                alpha=0.75,
                edgecolor=HIGHLIGHT,
                linewidth=2,
            )
        )
    if (r0, r1, c0, c1) != inside:
        ax.add_patch(
            Rectangle(
                (c0, r0),
                c1 - c0,
                r1 - r0,
                fill=False,
                edgecolor=PADDING,
                hatch="////",
                linewidth=1,
                linestyle="--",
            )
        )
    ax.add_patch(Rectangle((0, 0), n_cols, n_rows, fill=False, edgecolor="#59636e", linewidth=0.8))
    ax.set_xlim(min(0, c0), max(n_cols, c1))
    ax.set_ylim(max(n_rows, r1), min(0, r0))  # row 0 at the top, as arrays print
    ax.tick_params(labelsize=6)
    if rows is None:
        ax.set_yticks([])
        ax.set_aspect("auto")
    elif max(n_rows, n_cols) <= 50 * min(n_rows, n_cols):
        ax.set_aspect("equal")
    block_text = fmt.shape(operand.block_shape)
    where = ", ".join(f"{a}:{b}" for a, b in tiles.ranges(index, program))
    sliced_text = "".join(f", dim {d} at {at[d]}" for d in sliced)
    ax.set_title(
        f"{operand.label} ({role}) {fmt.array_type(operand.dtype, operand.shape)}\n"
        f"block {block_text}: [{where}]{sliced_text}",
        fontsize=8,
    )
    pad = tiles.padding(index, program)
    if any(before or after for before, after in pad):
        over = ", ".join(f"{b}+{a}" for b, a in pad)
        ax.set_xlabel(f"padding (before+after per dim): {over}", fontsize=7, color=PADDING)
