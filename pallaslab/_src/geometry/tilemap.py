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
import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pallaslab._src.geometry.copies import sequential_runs
from pallaslab._src.geometry.coverage import Coverage, coverage_of
from pallaslab._src.geometry.grid import SCHEDULES, Schedule, compact, open_grid, schedule_of
from pallaslab._src.geometry.limits import MAX_PROGRAMS
from pallaslab._src.geometry.operand_tiles import (
    Access,
    OperandTiles,
    clipped_size,
    reduced_grid,
)
from pallaslab._src.records import Kernel, Operand

with contextlib.suppress(ImportError):  # NumPy learns bfloat16, float8_* from ml_dtypes
    import ml_dtypes  # noqa: F401

__all__ = ["SCHEDULES", "Access", "Coverage", "OperandTiles", "Schedule", "TileMap", "schedule_of"]

_MANUAL_SPACES = frozenset({"any", "hbm", "host", "gmem", "semaphore", "semaphore_mem"})


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
            index = compact(full_index)  # before any arithmetic: keeps it small
            if kind == "blocked":
                starts.append(index * extent)
            else:  # squeezed, element, bounded: the index map gives an element offset
                starts.append(index - low)
            if size is None:
                extents.append(np.full(ones, extent, dtype=np.int64))
            else:  # a bounded slice: its size, at most the block size
                extents.append(np.clip(compact(size), 0, extent))
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
            self._coverage[operand_index] = coverage_of(self.tiles(operand_index), self.grid)
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
        sub, weight = reduced_grid(tiles, self.grid)
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
            sub, weight = reduced_grid(tiles, self.grid)
            size = clipped_size(tiles, sub)
            return int((size > 0).sum()) * weight, int(size.sum()) * weight * itemsize
        count, elements = sequential_runs(tiles, self.grid)
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
                sub, weight = reduced_grid(tiles, self.grid)
                empty = int((clipped_size(tiles, sub) == 0).sum()) * weight
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
