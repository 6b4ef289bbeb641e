"""Where each program's block of an operand starts, and blocks that miss their array."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from pallaslab._src.geometry.limits import check_programs
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel, Operand


def grid_indices(grid: Sequence[int]) -> list[np.ndarray]:
    """One array per grid axis, each of shape `grid`, enumerating every program.

    Raises:
        GridTooLargeError: For grids of more than `limits.MAX_PROGRAMS` programs.
    """
    check_programs(grid, "enumerate one by one")
    return list(np.indices(tuple(grid), dtype=np.int64)) if grid else []


def block_starts(
    operand: Operand, grid: Sequence[int], prefetch: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """Element offset of the operand's block, for every program.

    Args:
        operand: An input or output operand with an evaluable index map.
        grid: The kernel's grid.
        prefetch: Scalar-prefetch values, for index maps that read them.

    Returns:
        An int64 array of shape `(*grid, ndim)`: the first element of the block
        each program sees, per array dimension.
    """
    if operand.index_map is None:
        raise ValueError(f"{operand.label} has no index map")
    indices = operand.index_map.evaluate(grid_indices(grid), prefetch)
    padding = operand.element_padding or ((0, 0),) * len(indices)
    starts = []
    for index, kind, size, (low, _) in zip(
        indices, operand.block_kinds, operand.block_shape, padding, strict=True
    ):
        # Blocked dims count in blocks; squeezed, element and bounded dims in elements
        # (element dims into the array padded by `low`).
        starts.append(index * size if kind == "blocked" and size is not None else index - low)
    shape = (*tuple(grid), len(starts))
    return np.stack(starts, axis=-1).reshape(shape) if starts else np.zeros(shape, np.int64)


def program_starts(
    operand: Operand, grid: Sequence[int], prefetch: Sequence[np.ndarray] = ()
) -> np.ndarray:
    """`block_starts` as one row per program, in grid order: `(programs, ndim)`.

    Also for a 0-d operand, whose rows are empty (NumPy cannot infer a row count
    from an empty array: `reshape(-1, 0)` fails).
    """
    starts = block_starts(operand, grid, prefetch)
    return starts.reshape(math.prod(grid), starts.shape[-1])


@dataclasses.dataclass(frozen=True)
class StrayBlock:
    """A program whose block of an operand holds no element of the array.

    Attributes:
        operand: The operand.
        program: The program's grid indices.
        start: The block's first element, per dimension.
        dim: The first dimension along which the block misses the array.
        size: The block's extent along `dim` (the slice's, for a bounded slice).
    """

    operand: Operand
    program: tuple[int, ...]
    start: tuple[int, ...]
    dim: int
    size: int = 0

    def describe(self) -> str:
        """One sentence for error messages."""
        o = self.operand
        size = self.size or o.block_shape[self.dim] or 1
        low, high = _padding(o)[self.dim]
        extent = f"only {o.shape[self.dim]}"
        if low or high:
            last = o.shape[self.dim] + high - 1
            extent += f" (padded by {low} before and {high} after: {-low}..{last})"
        return (
            f"the block of {o.label} for program {self.program} covers elements "
            f"{self.start[self.dim]}..{self.start[self.dim] + size - 1} of dimension "
            f"{self.dim}, which has {extent} (block shape "
            f"{_fmt(o.block_shape)}, array shape {_fmt(o.shape)})."
        )


def stray_blocks(kernel: Kernel, prefetch: Sequence[np.ndarray] = ()) -> list[StrayBlock]:
    """Blocks wholly outside their array: every block needs one element inside.

    As permissive as Pallas: a block that overlaps its array anywhere is fine (edge
    blocks hang over the end; an element dimension's block may start in its
    padding, or before the array by less than its size), and an element
    dimension's array includes its `pl.Element` padding, which Pallas reads. A
    block that lies wholly past the end, or wholly before the start, reads or
    writes nothing real. Operands whose index maps cannot be evaluated here are
    skipped, and so are grids sized at run time. Blocks are computed only along the
    grid axes each index map reads, so any grid size works (see `TileMap`).

    Returns:
        At most one `StrayBlock` per operand: its first offending program.
    """
    if any(n < 0 for n in kernel.grid):
        return []
    tiles = TileMap(kernel, prefetch)
    found = []
    for entry in tiles.operands:
        operand = entry.operand
        if entry.access != "pipelined" or operand.index_map is None:
            continue
        padding = _padding(operand)
        misses = []
        for start, extent, size, (low, high) in zip(
            entry.starts, entry.extents, operand.shape, padding, strict=True
        ):
            # A bounded slice's size is dynamic, at least 1 element.
            misses.append((start >= size + high) | (start + np.maximum(extent, 1) <= -low))
        first: tuple[int, ...] | None = None
        for bad in misses:
            if bad.any():
                # The first program in row-major order whose block misses along `dim`:
                # axes the starts do not vary along (size 1) are at index 0.
                program = tuple(int(v) for v in np.argwhere(bad)[0])
                first = program if first is None else min(first, program)
        if first is None:
            continue
        dim = next(d for d, bad in enumerate(misses) if _at(bad, first))
        found.append(
            StrayBlock(
                operand,
                first,
                tuple(_at(array, first) for array in entry.starts),
                dim,
                max(_at(entry.extents[dim], first), 1),
            )
        )
    return found


def _padding(operand: Operand) -> tuple[tuple[int, int], ...]:
    """Per dimension, the `pl.Element` padding (low, high) Pallas adds around the array."""
    return operand.element_padding or ((0, 0),) * len(operand.shape)


def _at(array: np.ndarray, program: tuple[int, ...]) -> int:
    """One program's value of a compact per-program array (size 1 along axes it ignores)."""
    return int(array[tuple(min(p, n - 1) for p, n in zip(program, array.shape, strict=True))])


def _fmt(shape: Sequence[int | None]) -> str:
    inner = ", ".join("None" if s is None else str(s) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"
