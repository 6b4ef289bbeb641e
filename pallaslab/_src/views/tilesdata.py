"""The Tiles tab's data: tile maps aggregated in Python, sent as compact arrays.

Nothing here is per element or per program unless it must be: block positions are
sent per grid axis they depend on (`OperandTiles` keeps them compact), read counts
per compressed cell (`Coverage`), as base64 typed arrays of the narrowest integer
type. A 16384 x 16384 operand in 64 x 64 blocks takes a few hundred KiB.

Whatever the grid, a kernel's data stays within a byte budget (`KERNEL_BYTES`): when
it would not, neighbouring coverage cells merge (as for large arrays) and the grid
is sampled, every `stride[a]`-th program along axis `a` (1-D grids as 2-D ones): the
pictures and figures still count every program, and the scrubber steps through the
sampled ones (`shown`).
"""

from __future__ import annotations

import base64
import math
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.geometry import merit
from pallaslab._src.geometry.accesses import AccessMap, BlockAccesses
from pallaslab._src.geometry.coverage import Coverage
from pallaslab._src.geometry.grid import SCHEDULES
from pallaslab._src.geometry.operand_tiles import OperandTiles
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel, Operand, short_dtype
from pallaslab._src.views import fmt
from pallaslab._src.views.contracts import (
    AccessesReply,
    AccessMapModel,
    AccessRow,
    ChipFit,
    EncodedArray,
    Merit,
    TilesKernel,
    TilesKernelError,
    TilesOperand,
    TilesPane,
)
from pallaslab._src.views.contracts import (
    Coverage as CoverageModel,
)

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection

# Cells of one operand's coverage sent at most; beyond, neighbouring cells merge
# (keeping their largest count), which only coarsens the picture.
MAX_CELLS = 1 << 18
# Elements of a program's access maps sent at most, all buffers together (pooled
# beyond, by max), and loads and stores listed at most.
MAX_ACCESS_ELEMENTS = 1 << 18
MAX_ACCESSES = 2000
# Grids up to this many programs get a table of cells; larger ones a canvas.
MAX_TABLE_PROGRAMS = 1024
# Bytes of base64 arrays of one Tiles pane at most (the widget's messages stay < 2 MiB).
PANE_BYTES = 1 << 20
# A kernel's share of it never goes below this (many kernels in one cell).
MIN_KERNEL_BYTES = 96 << 10
DEFAULT_CHIPS = {"tpu": "v5e", "gpu": "H100"}

_DTYPES: tuple[tuple[str, Any], ...] = (
    ("u8", np.uint8),
    ("u16", np.uint16),
    ("i16", np.int16),
    ("u32", np.uint32),
    ("i32", np.int32),
)


def encode(values: Any) -> EncodedArray:
    """An integer array as {dtype, shape, data}: little-endian base64, narrowest type."""
    array = np.asarray(values)
    low = int(array.min()) if array.size else 0
    high = int(array.max()) if array.size else 0
    name, kind = "f64", np.float64  # beyond int32: exact up to 2**53
    for candidate, candidate_kind in _DTYPES:
        info = np.iinfo(candidate_kind)
        if info.min <= low and high <= info.max:
            name, kind = candidate, candidate_kind
            break
    dtype: Any = name
    data = np.ascontiguousarray(array, dtype=np.dtype(kind).newbyteorder("<"))
    return {
        "dtype": dtype,
        "shape": [int(n) for n in array.shape],
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
    }


def decode(encoded: EncodedArray) -> np.ndarray:
    """The inverse of `encode` (for tests and tools)."""
    kinds = dict(_DTYPES) | {"f64": np.float64}
    kind = np.dtype(kinds[encoded["dtype"]]).newbyteorder("<")
    raw = base64.b64decode(encoded["data"])
    return np.frombuffer(raw, dtype=kind).reshape(encoded["shape"])


def merge_cells(
    edges: np.ndarray, counts: np.ndarray, axis: int, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """At most `limit` cells along `axis`: neighbours merged, keeping the max count."""
    cells = len(edges) - 1
    if cells <= limit:
        return edges, counts
    group = math.ceil(cells / limit)
    starts = np.arange(0, cells, group)
    merged = np.maximum.reduceat(counts, starts, axis=axis)
    return np.append(edges[starts], edges[-1]), merged


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


def sampled(array: np.ndarray, stride: Sequence[int]) -> np.ndarray:
    """A compact per-program array at every `stride[a]`-th program along each axis."""
    steps = zip(array.shape, stride, strict=True)
    return array[tuple(slice(None, None, s) if n > 1 else slice(None) for n, s in steps)]


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


def _merit_json(figures: merit.KernelMerit) -> Merit:
    return {
        "operands": [
            {
                "index": o.index,
                "label": o.label,
                "role": o.role,
                "access": o.access,
                "reads": [o.reads_min, round(o.reads_mean, 3), o.reads_max],
                "transfers": o.transfers,
                "bytes": o.hbm_bytes,
                "bytesText": fmt.nbytes(o.hbm_bytes),
                "minBytesText": fmt.nbytes(o.min_bytes),
                "ratio": round(o.traffic_ratio, 3),
                "blockText": fmt.nbytes(o.block_bytes),
                "buffers": o.buffers,
            }
            for o in figures.operands
        ],
        "bytes": figures.hbm_bytes,
        "bytesText": fmt.nbytes(figures.hbm_bytes),
        "minBytesText": fmt.nbytes(figures.min_hbm_bytes),
        "ratio": round(figures.traffic_ratio, 3),
        "workingSet": figures.working_set_bytes,
        "workingSetText": fmt.nbytes(figures.working_set_bytes),
        "smemText": fmt.nbytes(figures.smem_bytes),
        "flops": figures.flops,
        "flopsText": _si(figures.flops, "FLOP") if figures.flops is not None else "unknown",
        "flopsSource": figures.flops_source,
        "flopsExact": figures.flops_exact,
        "intensity": (
            round(figures.arithmetic_intensity, 3)
            if figures.arithmetic_intensity is not None
            else None
        ),
        "computeDtype": figures.compute_dtype,
    }


def _fit_json(fit: merit.ChipFit, working_set: int) -> ChipFit:
    return {
        "chip": fit.chip,
        "capacity": fit.capacity_bytes,
        "capacityText": fmt.nbytes(fit.capacity_bytes),
        "capacityName": fit.capacity_name,
        "fits": fit.fits,
        "share": working_set / fit.capacity_bytes if fit.capacity_bytes else None,
        "peakText": _si(fit.peak_flops, "FLOP/s"),
        "peakName": fit.peak_name,
        "bandwidthText": _si(fit.bandwidth, "B/s"),
        "ridge": round(fit.ridge, 2),
        "intensity": round(fit.intensity, 3) if fit.intensity is not None else None,
        "bound": fit.bound,
        "attainableText": (
            _si(fit.attainable_flops, "FLOP/s") if fit.attainable_flops is not None else ""
        ),
        "secondsText": duration(fit.seconds),
        "notes": list(fit.notes),
    }


def duration(seconds: float) -> str:
    """A short time, down to nanoseconds: `15 ns`, `3.2 us`, `1.50 ms`."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.3g} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    return fmt.seconds(seconds)


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def axis_names(tiles: TileMap) -> list[str]:
    """Names of the grid axes: given ones, else the index maps' parameter names."""
    kernel = tiles.kernel
    if kernel.grid_names:
        return list(kernel.grid_names)
    rank = len(tiles.grid)
    for operand in kernel.operands:
        index_map = operand.index_map
        if index_map is not None and index_map.num_grid_args == rank:
            names = list(index_map.arg_names[:rank])
            if all(names) and len(set(names)) == rank:
                return names
    return ["ijklmn"[a] if a < 6 else f"g{a}" for a in range(rank)]


def order_text(tiles: TileMap, schedule: str) -> str:
    """How the backend orders the programs, in one or two sentences."""
    names = axis_names(tiles)
    if schedule == "gpu":
        return (
            "GPU: all programs run at once, in an unspecified order (one per thread "
            "block). The play button steps through them in row-major order only to show "
            "each one; a program must not depend on another's blocks."
        )
    text = (
        "TPU: programs run one after another in row-major order (the last grid axis "
        "changes fastest); a block is copied only when it differs from the previous "
        "program's."
    )
    semantics = tiles.kernel.dimension_semantics
    if semantics:
        parallel = [n for n, s in zip(names, semantics, strict=False) if s == "parallel"]
        arbitrary = [n for n, s in zip(names, semantics, strict=False) if s != "parallel"]
        if parallel:
            text += (
                f" Parallel axes ({', '.join(parallel)}) may be split between TensorCores "
                "on chips with two."
            )
        if arbitrary:
            text += f" Arbitrary axes ({', '.join(arbitrary)}) run in order on one core."
    return text


def _encoded_bytes(value: object) -> int:
    """Bytes of base64 data in a JSON value (what dominates a pane's size)."""
    if isinstance(value, dict):
        if "data" in value and "dtype" in value:
            return len(value["data"])
        return sum(_encoded_bytes(v) for v in value.values())
    if isinstance(value, list):
        return sum(_encoded_bytes(v) for v in value)
    return 0


def _base64_bytes(array: np.ndarray) -> int:
    """Bytes `encode(array)` takes (base64 of the narrowest integer type)."""
    if not array.size:
        return 0
    low, high = int(array.min()), int(array.max())
    size = next(
        (
            np.dtype(k).itemsize
            for _, k in _DTYPES
            if np.iinfo(k).min <= low <= high <= np.iinfo(k).max
        ),
        8,
    )
    return 4 * math.ceil(array.size * size / 3)


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
        per_cell = sum(_encoded_bytes(o.get("coverage", {})) for o in operands)
        if per_cell <= budget // 2 or cells <= 16:
            break
        cells //= 4
    arrays = [a for k in mapped for a in (*tiles.operands[k].starts, *tiles.operands[k].extents)]
    per_entry = [
        (tuple(int(n) for n in a.shape), _base64_bytes(a) / a.size if a.size else 0.0)
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


def kernel_json(tiles: TileMap, budget: int | None = None) -> TilesKernel:
    """One kernel's tile map, figures of merit and the chips to compare them with.

    Args:
        tiles: The tile map.
        budget: Bytes of array data at most (default `PANE_BYTES`); beyond it cells
            merge and the grid is sampled (`stride`, `shown`).
    """
    kernel = tiles.kernel
    names = axis_names(tiles)
    figures = {s: merit.kernel_merit(tiles, s) for s in SCHEDULES}
    fits = {
        s: [
            _fit_json(merit.on_chip(figures[s], chip), figures[s].working_set_bytes)
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
        "order": {"tpu": order_text(tiles, "tpu"), "gpu": order_text(tiles, "gpu")},
        "operands": operands,
        "merit": {"tpu": _merit_json(figures["tpu"]), "gpu": _merit_json(figures["gpu"])},
        "fits": {"tpu": fits["tpu"], "gpu": fits["gpu"]},
        "defaultChip": {"tpu": DEFAULT_CHIPS["tpu"], "gpu": DEFAULT_CHIPS["gpu"]},
        "notices": notices,
        "dtypes": sorted({short_dtype(o.dtype) for o in kernel.operands}),
    }


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
        tiles = inspection.tiles(index)
        cached[index] = (tiles, kernel_json(tiles, share))
    return cached[index]


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


# ---------------------------------------------------------------------------------
# Element-level accesses, sent on request for one program.


def _pool(values: np.ndarray, factors: Sequence[int]) -> np.ndarray:
    out = values
    for axis, factor in enumerate(factors):
        if factor > 1:
            out = np.maximum.reduceat(out, np.arange(0, out.shape[axis], factor), axis=axis)
    return out


def _as_rows(values: np.ndarray) -> np.ndarray:
    """A buffer drawn as rows x columns: leading dimensions stacked as rows."""
    if values.ndim == 0:
        return values.reshape(1, 1)
    if values.ndim == 1:
        return values.reshape(1, -1)
    return values.reshape(-1, values.shape[-1])


def access_map_json(access_map: AccessMap, max_elements: int | None = None) -> AccessMapModel:
    """One buffer's per-element reads, writes and masked lanes, ready to draw.

    Pooled (by max) to at most `max_elements` (default `MAX_ACCESS_ELEMENTS`) drawn.
    """
    limit = MAX_ACCESS_ELEMENTS if max_elements is None else max(1, max_elements)
    arrays = [_as_rows(a) for a in (access_map.reads, access_map.writes, access_map.masked)]
    inside = _as_rows(access_map.inside.astype(np.int64))
    rows, cols = arrays[0].shape
    factors = [1, 1]
    while math.ceil(rows / factors[0]) * math.ceil(cols / factors[1]) > limit:
        axis = 0 if math.ceil(rows / factors[0]) >= math.ceil(cols / factors[1]) else 1
        factors[axis] *= 2
    pooled = [_pool(a, factors) for a in (*arrays, inside)]
    ref = access_map.ref
    return {
        "label": ref.label,
        "role": ref.role,
        "operand": ref.operand,
        "shape": list(ref.shape),
        "type": fmt.array_type(ref.dtype, ref.shape) if ref.dtype else str(list(ref.shape)),
        "origin": list(access_map.origin),
        "box": list(access_map.reads.shape),
        "pool": factors,
        "reads": encode(pooled[0]),
        "writes": encode(pooled[1]),
        "masked": encode(pooled[2]),
        "inside": encode(pooled[3]),
        "summary": {
            "accesses": access_map.accesses,
            "untouched": access_map.untouched,
            "readTwice": access_map.read_twice,
            "writtenTwice": access_map.written_twice,
            "maskedLanes": access_map.masked_lanes,
            "outsideLanes": access_map.outside_lanes,
            "elements": math.prod(ref.shape),
        },
    }


def accesses_json(block: BlockAccesses) -> AccessesReply:
    """Every buffer's access map and the list of loads and stores, for one program.

    The buffers share `MAX_ACCESS_ELEMENTS` drawn elements, and the list keeps its
    first `MAX_ACCESSES` entries (`accessCount` says how many there are): a reply
    stays far under the widget's message limit.
    """
    share = MAX_ACCESS_ELEMENTS // max(1, len(block.refs))
    refs = [access_map_json(block.map(k), share) for k in range(len(block.refs))]
    accesses: list[AccessRow] = []
    for access in block.accesses[:MAX_ACCESSES]:
        shape = block.refs[access.ref].shape
        outside = access.outside(shape) & access.mask
        bbox = [[int(c.min()), int(c.max()) + 1] if c.size else [0, 0] for c in access.coords]
        accesses.append(
            {
                "kind": access.kind,
                "ref": access.ref,
                "primitive": access.primitive,
                "line": access.line,
                "file": access.file.rsplit("/", 1)[-1],
                "lanes": access.lanes,
                "masked": access.masked,
                "outside": int(np.count_nonzero(outside)),
                "bbox": bbox,
            }
        )
    return {
        "kernel": block.kernel,
        "program": list(block.program),
        "refs": refs,
        "accesses": accesses,
        "accessCount": len(block.accesses),
        "notices": list(block.notices),
        "complete": block.complete,
    }
