"""One kernel's Tiles data within a byte budget: cells merged, the grid sampled."""

from __future__ import annotations

import math

from pallaslab._src.geometry import merit
from pallaslab._src.geometry.grid import SCHEDULES
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import short_dtype
from pallaslab._src.views.contracts import TilesKernel, TilesOperand
from pallaslab._src.views.tilesdata.encoding import base64_bytes, encode, encoded_bytes, sampled
from pallaslab._src.views.tilesdata.figures import fit_json, merit_json
from pallaslab._src.views.tilesdata.operands import MAX_CELLS, operand_json
from pallaslab._src.views.tilesdata.order import axis_names, order_text

# Grids up to this many programs get a table of cells; larger ones a canvas.
MAX_TABLE_PROGRAMS = 1024
# Bytes of base64 arrays of one Tiles pane at most (the widget's messages stay < 2 MiB).
PANE_BYTES = 1 << 20
DEFAULT_CHIPS = {"tpu": "v5e", "gpu": "H100"}


def _fitted_operands(tiles: TileMap, budget: int) -> tuple[list[TilesOperand], tuple[int, ...]]:
    """Every operand's data within `budget` bytes: cells merged, programs sampled.

    Coverage cells come first (a quarter as many until they take at most half the
    budget); the per-program arrays then get what is left, sampling the grid's widest
    axis until they fit (sizes estimated without encoding: a 1e7-program grid is
    encoded once).
    """
    grid = tiles.grid
    mapped = [k for k, t in enumerate(tiles.operands) if t.mapped and t.operand.shape]
    cells = MAX_CELLS
    while True:
        operands = [
            operand_json(tiles, k, (0,) * len(grid), cells) for k in range(len(tiles.operands))
        ]
        per_cell = sum(encoded_bytes(o.get("coverage", {})) for o in operands)
        if per_cell <= budget // 2 or cells <= 16:
            break
        cells //= 4
    arrays = [a for k in mapped for a in (*tiles.operands[k].starts, *tiles.operands[k].extents)]
    per_entry = [
        (tuple(int(n) for n in a.shape), base64_bytes(a) / a.size if a.size else 0.0)
        for a in arrays
    ]
    varying = {a for shape, _ in per_entry for a, n in enumerate(shape) if n > 1}
    stride = [1] * len(grid)
    room = budget - per_cell

    def estimate() -> float:
        total = 0.0
        for shape, cost in per_entry:
            shown = [-(-n // stride[a]) if n > 1 else 1 for a, n in enumerate(shape)]
            total += cost * math.prod(shown)
        return total

    while estimate() > room:
        shown = {a: -(-grid[a] // stride[a]) for a in varying}
        widest = max(shown, key=lambda a: shown[a], default=None)
        if widest is None or shown[widest] <= 1:
            break
        stride[widest] *= 2
    for k, data in enumerate(operands):
        if data.get("mapped"):
            data["starts"] = [encode(sampled(a, stride)) for a in tiles.operands[k].starts]
            data["extents"] = [encode(sampled(a, stride)) for a in tiles.operands[k].extents]
    return operands, tuple(stride)


def kernel_json(
    tiles: TileMap,
    budget: int | None = None,
    figures_of: merit.KernelMerit | None = None,
    order: str | None = None,
) -> TilesKernel:
    """One kernel's tile map, figures of merit and the chips to compare them with.

    Args:
        tiles: The tile map.
        budget: Bytes of array data at most (default `PANE_BYTES`); beyond it cells
            merge and the grid is sampled (`stride`, `shown`).
        figures_of: The figures of merit to show under every schedule, when the
            kernel decides its copies itself (Mosaic GPU); else the map's, per schedule.
        order: How the programs run, in words, when the backend's schedules do not
            say it (Mosaic GPU's copy steps).
    """
    kernel = tiles.kernel
    names = axis_names(tiles)
    figures = {
        s: figures_of if figures_of is not None else merit.kernel_merit(tiles, s) for s in SCHEDULES
    }
    fits = {
        s: [
            fit_json(merit.on_chip(figures[s], chip), figures[s].working_set_bytes)
            for chip in merit.chips(s)
        ]
        for s in SCHEDULES
    }
    operands, stride = _fitted_operands(tiles, PANE_BYTES if budget is None else budget)
    shown = [-(-n // s) if n else n for n, s in zip(tiles.grid, stride, strict=True)]
    notices = tiles.notices()
    if any(s > 1 for s in stride):
        every = " x ".join(str(s) for s in stride)
        notices.append(
            f"{tiles.num_programs:,} programs: the scrubber and the programs' map show every "
            f"{every}-th program ({math.prod(shown):,} of them); reads and figures count them all."
        )
    return {
        "index": kernel.index,
        "name": kernel.name,
        "grid": list(tiles.grid),
        "axisNames": names,
        "programs": tiles.num_programs,
        "stride": list(stride),
        "shown": shown,
        "shownPrograms": math.prod(shown),
        "table": tiles.num_programs <= MAX_TABLE_PROGRAMS,
        "schedule": tiles.schedule,
        "semantics": list(kernel.dimension_semantics) if kernel.dimension_semantics else None,
        "order": {
            "tpu": order or order_text(tiles, "tpu"),
            "gpu": order or order_text(tiles, "gpu"),
        },
        "operands": operands,
        "merit": {"tpu": merit_json(figures["tpu"]), "gpu": merit_json(figures["gpu"])},
        "fits": {"tpu": fits["tpu"], "gpu": fits["gpu"]},
        "defaultChip": {"tpu": DEFAULT_CHIPS["tpu"], "gpu": DEFAULT_CHIPS["gpu"]},
        "notices": notices,
        "dtypes": sorted({short_dtype(o.dtype) for o in kernel.operands}),
    }
