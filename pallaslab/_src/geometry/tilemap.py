"""Tile maps: which block of every operand each program of a grid reads and writes.

Built from a `Kernel` record alone (plus scalar-prefetch values), with NumPy: each
operand's index map is evaluated over the whole grid at once, on an open grid
(`np.ix_`-style), so an operand whose block ignores some grid axes costs only the
axes it depends on. A 256 x 256 grid over a 16384 x 16384 array maps in
milliseconds; counts are kept run-length compressed (`Coverage`) and expanded to
one number per element only when asked.

Terms used throughout:
    program: one point of the grid, as a tuple of grid indices.
    block: the window of an operand one program sees; its `start` may be negative
        and its end may pass the array (`pl.Element` padding, partial edge blocks);
        `ranges` clips it to the array, `padding` says by how much it hangs over.
    schedule: "tpu" runs programs one after another in row-major order (last grid
        axis fastest) and skips the copy when consecutive programs use the same
        block; "gpu" runs them all in parallel, each moving its own blocks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from pallaslab._src.geometry.limits import MAX_PROGRAMS
from pallaslab._src.records import Kernel, Operand

with contextlib.suppress(ImportError):  # NumPy learns bfloat16, float8_* from ml_dtypes
    import ml_dtypes  # noqa: F401

Schedule = Literal["tpu", "gpu"]
SCHEDULES: tuple[Schedule, ...] = ("tpu", "gpu")

# How an operand reaches the kernel.
#   pipelined: BlockSpec blocks copied between HBM and VMEM / shared memory.
#   prefetch:  a scalar-prefetch operand, copied whole to SMEM once, before the grid.
#   manual:    left in HBM or host memory (`pl.ANY`, `pl.HOST`, mesh kernels): the body
#              copies what it needs.
#   scratch:   a kernel-local buffer, never in HBM.
#   unmapped:  its index map could not be evaluated here (see `reason`).
Access = Literal["pipelined", "prefetch", "manual", "scratch", "unmapped"]

_MANUAL_SPACES = frozenset({"any", "hbm", "host", "gmem", "semaphore", "semaphore_mem"})
# Cells of a compressed coverage beyond which counting is refused (memory).
_MAX_CELLS = 1 << 27


def schedule_of(kernel: Kernel, hint: str = "") -> Schedule:
    """The schedule a kernel's programs run in: from its backend, else from `hint`.

    Triton and Mosaic GPU kernels run on GPUs; Mosaic TPU kernels on TPUs. A kernel
    that names no backend runs where JAX runs it: `hint` ("gpu", "cuda", "rocm",
    "tpu", "cpu"); without one, the TPU's sequential grid, which is also the
    semantics of Pallas' interpret mode.
    """
    if kernel.backend in ("triton", "mosaic_gpu") or kernel.kind == "plgpu.kernel":
        return "gpu"
    if kernel.backend == "mosaic_tpu" or kernel.dimension_semantics:
        return "tpu"
    return "gpu" if hint in ("gpu", "cuda", "rocm") else "tpu"


def open_grid(grid: Sequence[int], axes: Collection[int] | None = None) -> list[np.ndarray]:
    """One index array per grid axis, shaped to broadcast against the others.

    With `axes`, only those axes are enumerated; the others hold index 0 (size 1),
    for expressions that do not read them: a grid of 2**40 programs costs nothing
    along the axes an index map ignores.
    """
    rank = len(grid)
    return [
        np.arange(n, dtype=np.int64).reshape([n if a == k else 1 for a in range(rank)])
        if axes is None or k in axes
        else np.zeros((1,) * rank, dtype=np.int64)
        for k, n in enumerate(grid)
    ]


def _compact(values: np.ndarray) -> np.ndarray:
    """`values` with every grid axis it does not vary along shrunk to size 1."""
    array = np.asarray(values)
    for axis in range(array.ndim):
        if array.shape[axis] == 1:
            continue
        first = array[(slice(None),) * axis + (slice(0, 1),)]
        if array.strides[axis] == 0 or bool(np.all(array == first)):
            array = first
    return np.array(array)  # a compact copy (ascontiguousarray would make 0-d arrays 1-d)


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


@dataclasses.dataclass(frozen=True, eq=False)
class OperandTiles:
    """Where one operand's block lies, for every program.

    Attributes:
        operand: The operand.
        access: How the operand reaches the kernel (see `Access`).
        starts: Per array dimension, the block's first element for every program
            (may be negative); shaped to broadcast over the grid, with size 1 on
            the grid axes the block does not depend on.
        extents: Per array dimension, the block's length in elements (1 for
            squeezed dimensions), shaped likewise (a `pl.BoundedSlice` may vary).
        reason: Why the operand is unmapped ("" otherwise).
    """

    operand: Operand
    access: Access
    starts: tuple[np.ndarray, ...] = ()
    extents: tuple[np.ndarray, ...] = ()
    reason: str = ""

    @property
    def mapped(self) -> bool:
        """Whether blocks are known (every role but scratch and unmapped)."""
        return self.access not in ("scratch", "unmapped")

    @property
    def axes(self) -> tuple[int, ...]:
        """Grid axes the block depends on; along the others it is revisited."""
        found: set[int] = set()
        for array in (*self.starts, *self.extents):
            found.update(a for a, n in enumerate(array.shape) if n > 1)
        return tuple(sorted(found))


@dataclasses.dataclass(frozen=True, eq=False)
class Coverage:
    """How many programs' blocks cover each element, run-length compressed.

    The array is cut along every dimension at every block boundary; within a cell
    the count is constant.

    Attributes:
        shape: The array's shape.
        edges: Per dimension, the cut positions: `edges[d][0] == 0`,
            `edges[d][-1] == shape[d]`, strictly increasing.
        counts: One count per cell, shape `(len(edges[d]) - 1, ...)`.
    """

    shape: tuple[int, ...]
    edges: tuple[np.ndarray, ...]
    counts: np.ndarray

    @property
    def cell_sizes(self) -> tuple[np.ndarray, ...]:
        """Per dimension, the length of each cell."""
        return tuple(np.diff(e) for e in self.edges)

    def _weights(self) -> np.ndarray:
        weights = np.ones((), dtype=np.int64)
        for d, sizes in enumerate(self.cell_sizes):
            weights = weights * sizes.reshape([-1 if a == d else 1 for a in range(len(self.shape))])
        return np.broadcast_to(weights, self.counts.shape)

    def expand(self) -> np.ndarray:
        """One count per element: an int array of the array's shape (int32 when it fits)."""
        full = self.counts.astype(np.int32 if self.max < 2**31 else np.int64)
        for d, sizes in enumerate(self.cell_sizes):
            full = np.repeat(full, sizes, axis=d)
        return np.array(full)

    @functools.cached_property
    def total(self) -> int:
        """Sum of the counts over all elements (element-blocks)."""
        return int((self.counts.astype(np.int64) * self._weights()).sum())

    @functools.cached_property
    def min(self) -> int:
        """Fewest programs covering one element."""
        return int(self.counts.min()) if self.counts.size else 0

    @functools.cached_property
    def max(self) -> int:
        """Most programs covering one element."""
        return int(self.counts.max()) if self.counts.size else 0

    @functools.cached_property
    def mean(self) -> float:
        """Programs covering an element, on average over the array."""
        size = math.prod(self.shape)
        return self.total / size if size else 0.0

    def cell_index(self, dim: int, coordinate: int) -> int:
        """The cell along `dim` holding element `coordinate` (clipped to the array)."""
        coordinate = min(max(int(coordinate), 0), self.shape[dim] - 1)
        return int(np.searchsorted(self.edges[dim], coordinate, side="right")) - 1

    def plane(
        self, rows: int | None, cols: int | None, at: Mapping[int, int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A 2-D cut: (row edges, column edges, counts) through element `at[d]` of the rest.

        A missing row (or column) dimension counts as one row (column) of size 1.
        """
        at = at or {}
        index = tuple(
            slice(None) if d in (rows, cols) else self.cell_index(d, at.get(d, 0))
            for d in range(len(self.shape))
        )
        counts = np.asarray(self.counts[index])
        row_edges = self.edges[rows] if rows is not None else np.array([0, 1])
        col_edges = self.edges[cols] if cols is not None else np.array([0, 1])
        return row_edges, col_edges, counts.reshape(len(row_edges) - 1, len(col_edges) - 1)

    def elements_with(self, count: int) -> int:
        """How many elements exactly `count` programs cover."""
        return int(self._weights()[self.counts == count].sum())


class TileMap:
    """Which block of every operand each program of a kernel's grid sees.

    Get one with `inspection.tiles(k)` (which supplies the run's scalar-prefetch
    values), or `TileMap(kernel, prefetch)` from a kernel record. Operands are named by
    their index in `kernel.operands`; programs by their grid-index tuple. Drawn by
    `pallaslab.draw_tiles` (a matplotlib figure) and the inspector's Tiles tab.

    Example:
        >>> tiles = inspection.tiles()
        >>> tiles.ranges(0, (1, 2))        # per dimension (start, stop), clipped
        ((64, 128), (0, 128))
        >>> tiles.read_counts(0).max()     # programs reading the busiest element
        4
        >>> tiles.hbm_bytes()              # bytes the BlockSpecs move
    """

    def __init__(
        self, kernel: Kernel, prefetch: Sequence[Any] = (), schedule: str | None = None
    ) -> None:
        if any(n < 0 for n in kernel.grid):
            raise ValueError(
                f"kernel {kernel.name} has a grid sized at run time (or negative) "
                f"{kernel.grid}; tile maps need static grid sizes"
            )
        if schedule is not None and schedule not in SCHEDULES:
            raise ValueError(f"schedule must be 'tpu' or 'gpu', not {schedule!r}")
        self.kernel = kernel
        self.grid: tuple[int, ...] = tuple(kernel.grid)
        self.prefetch: tuple[np.ndarray, ...] = tuple(np.asarray(p) for p in prefetch)
        self.schedule: Schedule = schedule_of(kernel) if schedule is None else schedule
        self.operands: tuple[OperandTiles, ...] = tuple(self._map(o) for o in kernel.operands)
        self._coverage: dict[int, Coverage] = {}

    # -- building ------------------------------------------------------------------

    def _map(self, operand: Operand) -> OperandTiles:
        if operand.role == "scratch":
            return OperandTiles(operand, "scratch", reason="scratch buffers live in the kernel")
        if operand.scalar_prefetch or operand.index_map is None:
            access: Access = "prefetch" if operand.scalar_prefetch else "manual"
            return self._whole(operand, access)
        if operand.memory_space in _MANUAL_SPACES:
            return self._whole(operand, "manual")
        index_map = operand.index_map
        if not index_map.evaluable:
            return OperandTiles(
                operand, "unmapped", reason=f"its index map needs JAX to evaluate: {index_map.text}"
            )
        unknown = [
            k for k in operand.block_kinds if k not in ("blocked", "squeezed", "element", "bounded")
        ]
        if unknown:
            return OperandTiles(
                operand, "unmapped", reason=f"{unknown[0]} block dimensions are not mapped yet"
            )
        if index_map.uses_prefetch and len(self.prefetch) != self.kernel.num_scalar_prefetch:
            return OperandTiles(
                operand,
                "unmapped",
                reason="its index map reads scalar-prefetch values; pass them: "
                "inspection.tiles(k, prefetch=(...))",
            )
        read = index_map.grid_args_used()
        evaluated = math.prod(self.grid[a] for a in read)
        if evaluated > MAX_PROGRAMS:
            return OperandTiles(
                operand,
                "unmapped",
                reason=f"its blocks change along grid axes of {evaluated:,} programs, more "
                f"than the {MAX_PROGRAMS:,} pallaslab maps",
            )
        grid = open_grid(self.grid, read)
        indices = index_map.evaluate(grid, self.prefetch)
        sizes = index_map.evaluate_sizes(grid, self.prefetch)
        padding = operand.element_padding or ((0, 0),) * len(indices)
        ones = (1,) * len(self.grid)
        starts, extents = [], []
        for full_index, size, kind, block, (low, _) in zip(
            indices, sizes, operand.block_kinds, operand.block_shape, padding, strict=True
        ):
            extent = 1 if block is None else int(block)
            index = _compact(full_index)  # before any arithmetic: keeps it small
            if kind == "blocked":
                starts.append(index * extent)
            else:  # squeezed, element, bounded: the index map gives an element offset
                starts.append(index - low)
            if size is None:
                extents.append(np.full(ones, extent, dtype=np.int64))
            else:  # a bounded slice: its size, at most the block size
                extents.append(np.clip(_compact(size), 0, extent))
        return OperandTiles(operand, "pipelined", tuple(starts), tuple(extents))

    def _whole(self, operand: Operand, access: Access) -> OperandTiles:
        ones = (1,) * len(self.grid)
        return OperandTiles(
            operand,
            access,
            tuple(np.zeros(ones, np.int64) for _ in operand.shape),
            tuple(np.full(ones, n, np.int64) for n in operand.shape),
        )

    # -- programs ------------------------------------------------------------------

    @property
    def num_programs(self) -> int:
        """Programs in the grid (1 for an empty grid)."""
        return math.prod(self.grid)

    def programs(self) -> Iterator[tuple[int, ...]]:
        """Every program, in row-major order: the TPU's order (a GPU's is unspecified)."""
        return itertools.product(*(range(n) for n in self.grid))

    def program_at(self, position: int) -> tuple[int, ...]:
        """The program at `position` in row-major order."""
        if not 0 <= position < self.num_programs:
            raise IndexError(f"program {position} of {self.num_programs}")
        return tuple(int(v) for v in np.unravel_index(position, self.grid)) if self.grid else ()

    def position(self, program: Sequence[int]) -> int:
        """Where `program` comes in row-major order (0-based)."""
        at = self._program(program)
        return int(np.ravel_multi_index(at, self.grid)) if self.grid else 0

    def _program(self, program: Sequence[int]) -> tuple[int, ...]:
        program = tuple(int(p) for p in program)
        if len(program) != len(self.grid) or any(
            not 0 <= p < n for p, n in zip(program, self.grid, strict=True)
        ):
            raise IndexError(f"program {program} is not in the grid {self.grid}")
        return program

    # -- one operand ---------------------------------------------------------------

    def tiles(self, operand_index: int) -> OperandTiles:
        """The mapped blocks of one operand.

        Raises:
            ValueError: For scratch buffers and operands whose index map could not be
                evaluated, saying why.
        """
        try:
            tiles = self.operands[operand_index]
        except IndexError:
            raise IndexError(
                f"kernel {self.kernel.name} has {len(self.operands)} operands, "
                f"not {operand_index + 1}"
            ) from None
        if not tiles.mapped:
            raise ValueError(f"{tiles.operand.label} has no tile map: {tiles.reason}")
        return tiles

    def block(self, operand_index: int, program: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """Per dimension, the block's (start, stop) in elements, before clipping."""
        tiles = self.tiles(operand_index)
        at = self._program(program)
        found = []
        for start, extent in zip(tiles.starts, tiles.extents, strict=True):
            s = int(start[tuple(min(p, n - 1) for p, n in zip(at, start.shape, strict=True))])
            e = int(extent[tuple(min(p, n - 1) for p, n in zip(at, extent.shape, strict=True))])
            found.append((s, s + e))
        return tuple(found)

    def ranges(self, operand_index: int, program: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """Per dimension, the (start, stop) elements of the block, clipped to the array.

        A squeezed dimension gives one element: `(i, i + 1)`. A block wholly outside
        the array gives an empty range, `start == stop`.
        """
        shape = self.tiles(operand_index).operand.shape
        return tuple(
            (min(max(lo, 0), n), min(max(hi, 0), n))
            for (lo, hi), n in zip(self.block(operand_index, program), shape, strict=True)
        )

    def padding(self, operand_index: int, program: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """Per dimension, how far the block hangs over the array: (before, after).

        A partial edge block of a 1000-long vector in 128-blocks: `((0, 24),)`.
        """
        shape = self.tiles(operand_index).operand.shape
        return tuple(
            (max(0, min(hi, 0) - lo), max(0, hi - max(lo, n)))
            for (lo, hi), n in zip(self.block(operand_index, program), shape, strict=True)
        )

    def coverage(self, operand_index: int) -> Coverage:
        """How many programs' blocks cover each element, compressed (see `Coverage`)."""
        if operand_index not in self._coverage:
            self._coverage[operand_index] = _coverage(self.tiles(operand_index), self.grid)
        return self._coverage[operand_index]

    def read_counts(self, operand_index: int) -> np.ndarray:
        """How many programs' blocks cover each element (an int array of its shape).

        For inputs, how often each element is read into a block; for outputs, how
        many programs write a block holding it. Padding is not counted.
        """
        return self.coverage(operand_index).expand()

    def visits(self, operand_index: int) -> np.ndarray:
        """Per program (grid-shaped), how many programs map to the same block.

        The k-accumulating matmul's output block is visited K / BK times.
        """
        tiles = self.tiles(operand_index)
        sub, weight = _reduced_grid(tiles, self.grid)
        if not sub:
            return np.broadcast_to(np.int64(self.num_programs), self.grid)
        # Number the distinct blocks one coordinate at a time (1-D uniques are fast).
        key = np.zeros(math.prod(sub), dtype=np.int64)
        for array in (*tiles.starts, *tiles.extents):
            if array.size == 1:
                continue
            _, rank = np.unique(np.broadcast_to(array, sub).ravel(), return_inverse=True)
            _, key = np.unique(key * (int(rank.max()) + 1) + rank.ravel(), return_inverse=True)
        counts = np.bincount(key.ravel())
        per_program = (counts[key.ravel()] * weight).reshape(sub)
        return np.broadcast_to(per_program, self.grid)

    def revisit_axes(self, operand_index: int) -> tuple[int, ...]:
        """Grid axes along which the operand's block stays the same."""
        tiles = self.tiles(operand_index)
        return tuple(a for a, n in enumerate(self.grid) if n > 1 and a not in tiles.axes)

    def transfers(self, operand_index: int, schedule: str | None = None) -> int:
        """How many times the operand's block is copied between HBM and the kernel.

        TPU: once per run of consecutive programs (row-major) on the same block.
        GPU: once per program. Scalar prefetch: once. Scratch and operands left in
        HBM: never (the body moves what it needs itself).
        """
        return self._traffic(operand_index, schedule)[0]

    def operand_hbm_bytes(self, operand_index: int, schedule: str | None = None) -> int:
        """Bytes of this operand crossing between HBM and the kernel (see `transfers`).

        Each copy moves the part of the block inside the array; padding is not read.
        """
        return self._traffic(operand_index, schedule)[1]

    def _traffic(self, operand_index: int, schedule: str | None) -> tuple[int, int]:
        tiles = self.operands[operand_index]
        if tiles.access in ("scratch", "manual", "unmapped"):
            return 0, 0
        itemsize = np.dtype(tiles.operand.dtype).itemsize
        if tiles.access == "prefetch":
            return 1, tiles.operand.nbytes
        if (schedule or self.schedule) == "gpu":
            sub, weight = _reduced_grid(tiles, self.grid)
            size = _clipped_size(tiles, sub)
            return int((size > 0).sum()) * weight, int(size.sum()) * weight * itemsize
        count, elements = _sequential_runs(tiles, self.grid)
        return count, elements * itemsize

    # -- the kernel ----------------------------------------------------------------

    def hbm_bytes(self, schedule: str | None = None) -> int:
        """Bytes moved between HBM and the kernel by its BlockSpecs (and prefetch)."""
        return sum(self.operand_hbm_bytes(k, schedule) for k in range(len(self.operands)))

    def min_hbm_bytes(self) -> int:
        """The least traffic the same operands allow: each byte crossing once."""
        return sum(t.operand.nbytes for t in self.operands if t.access in ("pipelined", "prefetch"))

    def notices(self) -> list[str]:
        """Operands without a tile map, and blocks that miss their array."""
        found = []
        for k, tiles in enumerate(self.operands):
            if tiles.access == "unmapped":
                found.append(f"{tiles.operand.label}: not mapped: {tiles.reason}.")
            elif tiles.access == "manual":
                found.append(
                    f"{tiles.operand.label} stays in HBM ({tiles.operand.memory_space}): the "
                    "body copies what it needs, so its traffic is not counted here."
                )
            elif tiles.access == "pipelined":
                sub, weight = _reduced_grid(tiles, self.grid)
                empty = int((_clipped_size(tiles, sub) == 0).sum()) * weight
                if empty:
                    found.append(
                        f"{tiles.operand.label}: {empty} program(s) get a block wholly "
                        f"outside the array (operand {k})."
                    )
        return found

    def __repr__(self) -> str:
        return (
            f"<TileMap of {self.kernel.name}: grid {self.grid}, {len(self.operands)} operands, "
            f"{self.schedule} schedule>"
        )


# ---------------------------------------------------------------------------------
# Counting, on the smallest grid that tells the operand's programs apart.


def _reduced_grid(tiles: OperandTiles, grid: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """The grid restricted to the axes the block depends on, and the repeat count.

    Programs that differ only along other axes see the same block, so each point of
    the reduced grid stands for `weight` programs.
    """
    axes = tiles.axes
    sub = tuple(n if a in axes else 1 for a, n in enumerate(grid))
    weight = math.prod(n for a, n in enumerate(grid) if a not in axes)
    return sub, weight


def _clipped_bounds(
    tiles: OperandTiles, sub: tuple[int, ...]
) -> list[tuple[np.ndarray, np.ndarray]]:
    bounds = []
    for start, extent, n in zip(tiles.starts, tiles.extents, tiles.operand.shape, strict=True):
        lo = np.clip(np.broadcast_to(start, sub), 0, n)
        hi = np.clip(np.broadcast_to(start + extent, sub), 0, n)
        bounds.append((lo, np.maximum(hi, lo)))
    return bounds


def _clipped_size(tiles: OperandTiles, sub: tuple[int, ...]) -> np.ndarray:
    size = np.ones(sub, dtype=np.int64)
    for lo, hi in _clipped_bounds(tiles, sub):
        size = size * (hi - lo)
    return size


def _coverage(tiles: OperandTiles, grid: tuple[int, ...]) -> Coverage:
    """Counts by a difference array over the compressed cells: O(programs * 2^rank)."""
    shape = tiles.operand.shape
    sub, weight = _reduced_grid(tiles, grid)
    if not shape:
        return Coverage((), (), np.asarray(math.prod(grid), dtype=np.int64))
    bounds = [(lo.ravel(), hi.ravel()) for lo, hi in _clipped_bounds(tiles, sub)]
    nonempty = np.ones(bounds[0][0].shape, dtype=bool)
    for lo, hi in bounds:
        nonempty &= hi > lo
    bounds = [(lo[nonempty], hi[nonempty]) for lo, hi in bounds]
    edges = tuple(
        _sorted_unique(np.concatenate([[0, n], lo, hi]).astype(np.int64))
        for (lo, hi), n in zip(bounds, shape, strict=True)
    )
    cells = tuple(len(e) - 1 for e in edges)
    if math.prod(cells) > _MAX_CELLS:
        raise ValueError(
            f"{tiles.operand.label}: {math.prod(cells)} distinct block boundaries are too "
            "many to count"
        )
    # Each block adds +1 at its first cell and cancels at one past its last, per
    # dimension; prefix sums along every axis then give the counts.
    first = [np.searchsorted(e, lo) for e, (lo, _) in zip(edges, bounds, strict=True)]
    last = [np.searchsorted(e, hi) for e, (_, hi) in zip(edges, bounds, strict=True)]
    diff_shape = tuple(c + 1 for c in cells)
    diff = np.zeros(math.prod(diff_shape), dtype=np.int64)
    for corner in itertools.product((0, 1), repeat=len(shape)):
        index = np.ravel_multi_index(
            [b if c else a for a, b, c in zip(first, last, corner, strict=True)], diff_shape
        )
        sign = -1 if sum(corner) % 2 else 1
        diff += sign * np.bincount(index, minlength=diff.size)
    counts = diff.reshape(diff_shape)
    for axis in range(len(shape)):
        counts = np.cumsum(counts, axis=axis)
    counts = counts[tuple(slice(0, c) for c in cells)] * weight
    return Coverage(tuple(shape), edges, np.ascontiguousarray(counts))


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: `np.unique` by sorting.

    NumPy 2's hashing `unique` takes half a minute on the arithmetic sequences block
    edges make (2e7 of them), where sorting takes a second.
    """
    ordered = np.sort(values)
    keep = np.ones(ordered.shape, dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


def _sequential_runs(tiles: OperandTiles, grid: tuple[int, ...]) -> tuple[int, int]:
    """Copies in a row-major sequential schedule: (count, elements moved).

    A copy happens when a program's block differs from the previous program's.
    Consecutive programs differ by a carry at some grid axis m: axis m steps up by
    one and every later axis wraps from its end to 0. So for each m, comparing the
    blocks on both sides of those carries counts every change; the compact arrays
    keep each comparison as small as the axes the block depends on, and axes it
    ignores multiply the count.
    """
    rank = len(grid)
    shape = tiles.operand.shape
    keys = (*tiles.starts, *tiles.extents)

    def side(array: np.ndarray, m: int, after: bool) -> np.ndarray:
        index: list[slice] = []
        for a in range(rank):
            n = array.shape[a]
            if a < m:
                index.append(slice(None))
            elif a == m:
                index.append(slice(0, 1) if n == 1 else slice(1, n) if after else slice(0, n - 1))
            else:
                index.append(slice(0, 1) if after else slice(n - 1, n))
        return array[tuple(index)]

    def moved(starts: Sequence[np.ndarray], extents: Sequence[np.ndarray]) -> np.ndarray:
        size = np.ones((), dtype=np.int64)
        for start, extent, n in zip(starts, extents, shape, strict=True):
            size = size * np.maximum(np.clip(start + extent, 0, n) - np.clip(start, 0, n), 0)
        return size

    first = int(
        moved([a[(0,) * rank] for a in tiles.starts], [a[(0,) * rank] for a in tiles.extents])
    )
    count, elements = (1, first) if first else (0, 0)
    half = len(tiles.starts)
    for m in range(rank):
        if grid[m] < 2:
            continue
        before = [side(k, m, after=False) for k in keys]
        after = [side(k, m, after=True) for k in keys]
        changed = np.zeros((), dtype=bool)
        for b, a in zip(before, after, strict=True):
            changed = changed | (b != a)
        size = moved(after[:half], after[half:])
        copies = changed & (size > 0)
        both = np.broadcast_shapes(copies.shape, size.shape, *(k.shape for k in after))
        # Axes the comparison did not need stand for that many identical carries.
        factor = math.prod(grid[a] for a in range(m) if both[a] == 1)
        factor *= grid[m] - 1 if both[m] == 1 else 1
        count += int(np.broadcast_to(copies, both).sum()) * factor
        elements += int(np.broadcast_to(np.where(copies, size, 0), both).sum()) * factor
    return count, elements
