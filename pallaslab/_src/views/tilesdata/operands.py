"""One operand as the Tiles tab draws it: its blocks per program and its read counts."""

from __future__ import annotations

from collections.abc import Sequence

from pallaslab._src.geometry.coverage import Coverage
from pallaslab._src.geometry.operand_tiles import OperandTiles
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Operand
from pallaslab._src.views import fmt
from pallaslab._src.views.contracts import Coverage as CoverageModel
from pallaslab._src.views.contracts import TilesOperand
from pallaslab._src.views.tilesdata.encoding import encode, merge_cells, sampled

# Cells of one operand's coverage sent at most; beyond, neighbouring cells merge
# (keeping their largest count), which only coarsens the picture.
MAX_CELLS = 1 << 18


def coverage_json(
    coverage: Coverage, rows: int | None, cols: int | None, max_cells: int | None = None
) -> CoverageModel:
    """Edges and counts, merging cells along the drawn dimensions if there are too many."""
    max_cells = MAX_CELLS if max_cells is None else max_cells
    edges = list(coverage.edges)
    counts = coverage.counts
    drawn = [d for d in (rows, cols) if d is not None]
    while counts.size > max_cells and drawn:
        widest = max(drawn, key=lambda d: len(edges[d]))
        along = len(edges[widest]) - 1
        if len(drawn) == 1:  # straight to the size that fits
            limit = max(1, max_cells // max(1, counts.size // along))
        else:  # halve the wider side, so the picture keeps its proportions
            limit = max(1, along // 2)
        edges[widest], counts = merge_cells(edges[widest], counts, widest, limit)
        if len(edges[widest]) - 1 <= 1:
            drawn.remove(widest)
    return {
        "edges": [encode(e) for e in edges],
        "counts": encode(counts),
        "merged": counts.shape != coverage.counts.shape,
        "min": coverage.min,
        "max": coverage.max,
        "mean": round(coverage.mean, 4),
        "never": coverage.elements_with(0),
    }


def _view_bounds(entry: OperandTiles, dim: int | None) -> list[int]:
    """The span a picture must show along `dim`: the array and any overhang."""
    if dim is None:
        return [0, 1]
    n = entry.operand.shape[dim]
    start, extent = entry.starts[dim], entry.extents[dim]
    low = min(0, int(start.min()))
    high = max(n, int((start + extent).max()))
    # Blocks far outside the array are reported, not drawn.
    return [max(low, -n), min(high, 2 * n)]


def shown_dims(operand: Operand) -> tuple[int | None, int | None, tuple[int, ...]]:
    """Which array dimensions a picture shows as rows and columns; the rest are sliced.

    1-D arrays are a strip (no row dimension); 2-D arrays show both. Higher ranks
    show the last two dimensions the block does not squeeze (a squeezed dimension
    is one element wide: a poor axis to draw), and slice the others.
    """
    rank = len(operand.shape)
    if rank == 0:
        return None, None, ()
    if rank == 1:
        return None, 0, ()
    if rank == 2:
        return 0, 1, ()
    wide = [d for d, k in enumerate(operand.block_kinds) if k != "squeezed"]
    picked = wide[-2:]
    for d in range(rank - 1, -1, -1):  # too few: fill with the last dimensions
        if len(picked) == 2:
            break
        if d not in picked:
            picked.append(d)
    rows, cols = sorted(picked)
    return rows, cols, tuple(d for d in range(rank) if d not in (rows, cols))


def operand_json(
    tiles: TileMap,
    index: int,
    stride: Sequence[int] | None = None,
    max_cells: int | None = None,
) -> TilesOperand:
    """One operand: what it is, where its blocks lie per program, how often it is read.

    Args:
        tiles: The tile map.
        index: The operand's position.
        stride: Per grid axis, send every `stride[a]`-th program's block (all: 1).
        max_cells: Coverage cells sent at most (default `MAX_CELLS`).
    """
    stride = stride or (1,) * len(tiles.grid)
    skip_programs = any(s <= 0 for s in stride)
    entry = tiles.operands[index]
    operand = entry.operand
    rows, cols, sliced = shown_dims(operand)
    role = "prefetch" if operand.scalar_prefetch else operand.role
    data: TilesOperand = {
        "index": index,
        "label": operand.label,
        "role": role,
        "access": entry.access,
        "reason": entry.reason,
        "shape": list(operand.shape),
        "type": fmt.array_type(operand.dtype, operand.shape),
        "block": fmt.operand_block(operand),
        "blockShape": list(operand.block_shape),
        "kinds": list(operand.block_kinds),
        "indexMap": fmt.index_map_text(operand),
        "memory": operand.memory_space,
        "dims": {"rows": rows, "cols": cols, "sliced": list(sliced)},
        "mapped": entry.mapped and bool(operand.shape),
    }
    if not data["mapped"]:
        return data
    coverage = tiles.coverage(index)
    data["starts"] = [] if skip_programs else [encode(sampled(s, stride)) for s in entry.starts]
    data["extents"] = [] if skip_programs else [encode(sampled(e, stride)) for e in entry.extents]
    data["coverage"] = coverage_json(coverage, rows, cols, max_cells)
    data["bounds"] = {"rows": _view_bounds(entry, rows), "cols": _view_bounds(entry, cols)}
    data["revisitAxes"] = list(tiles.revisit_axes(index))
    return data
