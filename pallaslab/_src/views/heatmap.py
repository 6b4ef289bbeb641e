"""Mismatches per output block as a heatmap: data for the widget, SVG for static HTML.

An output's tiles are laid out in 2-D: a 1-D output is one row of blocks; an output
of more dimensions shows its last two dimensions' tiles, with the leading ones
stacked as rows (labelled). Large tilings are coarsened (max-pooled), so a heatmap
message stays small.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

from pallaslab._src.records import TileMismatch
from pallaslab._src.views.contracts import HeatmapModel

MAX_CELLS = 64 * 64


def payload(tile: TileMismatch) -> HeatmapModel:
    """The view model of one output's heatmap (plain JSON)."""
    counts, nonfinite, row_label, col_label = _as_2d(tile.counts, tile.nonfinite)
    rows, cols = counts.shape
    pool_r = max(1, math.ceil(rows / math.isqrt(MAX_CELLS)))
    pool_c = max(1, math.ceil(cols / math.isqrt(MAX_CELLS)))
    if pool_r > 1 or pool_c > 1:
        counts, nonfinite = _pool(counts, pool_r, pool_c), _pool(nonfinite, pool_r, pool_c)
    per_tile = int(np.prod(tile.tile_shape)) * pool_r * pool_c
    data: HeatmapModel = {
        "output": tile.output,
        "kernel": tile.kernel,
        "operand": tile.operand,
        "shape": list(tile.shape),
        "tileShape": list(tile.tile_shape),
        "tiles": list(tile.tiles),
        "rowLabel": row_label,
        "colLabel": col_label,
        "pool": [pool_r, pool_c],
        "perTile": per_tile,
        "counts": counts.astype(int).tolist(),
        "nonfinite": nonfinite.astype(int).tolist(),
        "badTiles": [list(t) for t in tile.bad_tiles[:200]],
        "badTileCount": len(tile.bad_tiles),
        "badPrograms": [list(p) for p in tile.bad_programs[:200]],
        "badProgramCount": len(tile.bad_programs),
        "grid": list(tile.grid),
        "pattern": tile.pattern,
        "nan": tile.nan_count,
        "inf": tile.inf_count,
        "referenceNonfinite": tile.reference_nonfinite,
        "note": tile.note,
        "description": "",
    }
    data["description"] = describe(data)
    return data


def differing(tiles: Sequence[TileMismatch]) -> list[HeatmapModel]:
    """The heatmaps of the outputs whose blocks differ or hold NaN/Inf."""
    return [payload(t) for t in tiles if t.bad_tiles or t.nan_count or t.inf_count]


def _as_2d(counts: np.ndarray, nonfinite: np.ndarray) -> tuple[np.ndarray, np.ndarray, str, str]:
    if counts.ndim == 0:
        return counts.reshape(1, 1), nonfinite.reshape(1, 1), "", ""
    if counts.ndim == 1:
        return counts.reshape(1, -1), nonfinite.reshape(1, -1), "", "block"
    if counts.ndim == 2:
        return counts, nonfinite, "block row (dim 0)", "block column (dim 1)"
    lead = counts.shape[:-1]
    label = f"dims 0..{counts.ndim - 2} flattened"
    return (
        counts.reshape(int(np.prod(lead)), -1),
        nonfinite.reshape(int(np.prod(lead)), -1),
        label,
        f"block (dim {counts.ndim - 1})",
    )


def _pool(values: np.ndarray, pr: int, pc: int) -> np.ndarray:
    rows, cols = values.shape
    padded = np.zeros((math.ceil(rows / pr) * pr, math.ceil(cols / pc) * pc), values.dtype)
    padded[:rows, :cols] = values
    pooled: np.ndarray = padded.reshape(padded.shape[0] // pr, pr, padded.shape[1] // pc, pc).sum(
        axis=(1, 3)
    )
    return pooled


def describe(data: HeatmapModel) -> str:
    """One sentence: how many blocks differ, where, and any NaN/Inf."""
    total = int(np.prod(data["tiles"])) if data["tiles"] else 1
    text = f"{data['badTileCount']} of {total} blocks of output {data['output']} differ"
    if data["pattern"]:
        text += f": {data['pattern']}"
    if data["kernel"]:
        text += f" (blocks of {data['kernel']}'s {data['operand']}, {_shape(data['tileShape'])})"
    if data["nan"] or data["inf"]:
        text += f"; {data['nan']} NaN and {data['inf']} Inf where the reference is finite"
    if data["referenceNonfinite"]:
        text += f"; the reference itself has {data['referenceNonfinite']} NaN/Inf"
    return text + "."


def _shape(dims: list[int]) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def static_svg(data: HeatmapModel, cell: int = 0) -> str:
    """The heatmap as inline SVG (every text escaped): red for mismatches, purple for NaN/Inf."""
    counts = data["counts"]
    nonfinite = data["nonfinite"]
    rows, cols = len(counts), len(counts[0]) if counts else 0
    cell = cell or max(6, min(28, 560 // max(cols, 1), 280 // max(rows, 1)))
    width, height = cols * cell + 2, rows * cell + 2
    per_tile = max(data["perTile"], 1)
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"role='img' aria-label='{html.escape(describe(data), quote=True)}'>"
    ]
    for r in range(rows):
        for c in range(cols):
            count, bad_values = counts[r][c], nonfinite[r][c]
            fill = _colour(count, bad_values, per_tile)
            title = _cell_title(data, r, c, count, bad_values)
            parts.append(
                f"<rect x='{c * cell + 1}' y='{r * cell + 1}' width='{cell - 1}' "
                f"height='{cell - 1}' fill='{fill}' stroke='#d1d9e0'>"
                f"<title>{html.escape(title)}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)


def _colour(count: int, nonfinite: int, per_tile: int) -> str:
    if nonfinite:
        return "#8250df"
    if not count:
        return "#eef6ee"
    share = min(1.0, count / per_tile)
    # From light to strong red as more of the block differs (never white: any miss shows).
    light = int(200 - 150 * share)
    return f"rgb(230,{light},{light})"


def _cell_title(data: HeatmapModel, r: int, c: int, count: int, nonfinite: int) -> str:
    pool_r, pool_c = data["pool"]
    where = (
        f"block ({r}, {c})"
        if len(data["tiles"]) == 2 and pool_r == pool_c == 1
        else (f"block {c}" if len(data["tiles"]) == 1 and pool_c == 1 else f"cell ({r}, {c})")
    )
    text = f"{where}: {count} of {data['perTile']} elements differ"
    if nonfinite:
        text += f", {nonfinite} NaN/Inf"
    return text
