"""The Tiles tab's model: every kernel's data, computed once per inspection."""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING

from pallaslab._src.base import messages
from pallaslab._src.geometry.mosaic_gpu import CopyMap
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel
from pallaslab._src.views.contracts import TilesKernel, TilesKernelError, TilesPane
from pallaslab._src.views.tilesdata.kernel import PANE_BYTES, kernel_json
from pallaslab._src.views.tilesdata.mosaic import (
    ACCESSES_NOTE,
    copy_order_text,
    copy_window_text,
    mosaic_json,
)

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

# A kernel's share of it never goes below this (many kernels in one cell).
MIN_KERNEL_BYTES = 96 << 10


# The Tiles pane and the static page both need each kernel's map and data, which
# take seconds on grids of millions of programs: computed once per inspection.
_recent: weakref.WeakKeyDictionary[Inspection, dict[int, tuple[TileMap, TilesKernel]]] = (
    weakref.WeakKeyDictionary()
)


def kernel_data(inspection: Inspection, index: int) -> tuple[TileMap, TilesKernel]:
    """A kernel's tile map and `kernel_json` (its share of the pane's budget), cached.

    Raises:
        ValueError: When the kernel has no tile map (e.g. a grid sized at run time).
    """
    cached = _recent.setdefault(inspection, {})
    if index not in cached:
        share = max(MIN_KERNEL_BYTES, PANE_BYTES // max(1, len(inspection.kernels)))
        record = inspection.kernel(index)
        if record.backend == "mosaic_gpu":
            cached[index] = mosaic_kernel_data(inspection, index, share)
        else:
            tiles = inspection.tiles(index)
            cached[index] = (tiles, kernel_json(tiles, share))
    return cached[index]


def mosaic_kernel_data(
    inspection: Inspection, index: int, share: int
) -> tuple[TileMap, TilesKernel]:
    """A Mosaic GPU kernel's tile map (its copies', or its BlockSpecs') and Mosaic GPU part.

    What cannot be read of the kernel leaves its part with one sentence saying so;
    the rest of the tab stands.
    """
    tiles = inspection.tiles(index)
    try:
        plan = inspection.plan(index)
        budget = inspection.smem(index)
        figures = inspection.merit(index)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as error:
        data = kernel_json(tiles, share)
        data["mosaicError"] = (
            "pallaslab could not read what this Mosaic GPU kernel allocates and copies: "
            f"{messages.error_text(error)}"
        )
        data["accessesNote"] = ACCESSES_NOTE
        return tiles, data
    copies = isinstance(tiles, CopyMap)
    data = kernel_json(
        tiles, share, figures_of=figures, order=copy_order_text(plan) if copies else None
    )
    data["mosaic"] = mosaic_json(plan, budget, inspection.kernel(index), copy_map=copies)
    data["accessesNote"] = ACCESSES_NOTE
    if copies:
        for operand in data["operands"]:
            window = copy_window_text(plan, operand["index"])
            if window:
                operand["block"] = window
                operand["indexMap"] = "where the body's copies land, step by step"
    return tiles, data


def forget(inspection: Inspection) -> None:
    """Drops what `kernel_data` keeps of an inspection (for benchmarks that time it)."""
    _recent.pop(inspection, None)


# Kernels whose blocks vary over more programs than this get no static picture (it is
# made at display time, and counting millions of blocks takes seconds).
STATIC_MAX_BLOCKS = 1 << 20


def blocks_at_most(kernel: Kernel) -> int:
    """An upper bound on the distinct blocks of an operand: the programs its map reads."""
    return max(
        (
            math.prod(kernel.grid[a] for a in o.index_map.grid_args_used())
            for o in kernel.operands
            if o.index_map is not None and o.index_map.evaluable
        ),
        default=1,
    )


def payload(inspection: Inspection, *, static: bool = False) -> TilesPane:
    """The Tiles tab's model: one entry per kernel (or why it has no tile map).

    `static`: as saved notebooks show it, kernels with millions of blocks left out
    (counting them takes seconds at display time, for a picture only a saved notebook
    shows; the live tab counts them when opened).
    """
    kernels: list[TilesKernel | TilesKernelError] = []
    for kernel in inspection.kernels:
        if static and blocks_at_most(kernel) > STATIC_MAX_BLOCKS:
            kernels.append(
                {
                    "index": kernel.index,
                    "name": kernel.name,
                    "error": f"{kernel.num_programs:,} programs, each with blocks of its own; "
                    "the Tiles tab draws them when opened (not kept in saved notebooks).",
                }
            )
            continue
        try:
            kernels.append(kernel_data(inspection, kernel.index)[1])
        except (ValueError, IndexError) as error:
            text = messages.error_text(error)
            kernels.append({"index": kernel.index, "name": kernel.name, "error": text})
    return {"kernels": kernels}
