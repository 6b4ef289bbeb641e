"""Where each program's block of an operand starts, and blocks that miss their array."""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class StrayBlock:
    """A program whose block of an operand holds no element of the array.

    Attributes:
        operand: The operand.
        program: The program's grid indices.
        start: The block's first element, per dimension.
        dim: The first dimension along which the block misses the array.
    """

    operand: Operand
    program: tuple[int, ...]
    start: tuple[int, ...]
    dim: int

    def describe(self) -> str:
        """One sentence for error messages."""
        o = self.operand
        size = o.block_shape[self.dim] or 1
        return (
            f"the block of {o.label} for program {self.program} covers elements "
            f"{self.start[self.dim]}..{self.start[self.dim] + size - 1} of dimension "
            f"{self.dim}, which has only {o.shape[self.dim]} (block shape "
            f"{_fmt(o.block_shape)}, array shape {_fmt(o.shape)})."
        )


def stray_blocks(kernel: Kernel, prefetch: Sequence[np.ndarray] = ()) -> list[StrayBlock]:
    """Blocks that start outside their array: every block needs one element inside.

    Edge blocks that hang over the end are fine (Pallas pads them); a block that
    starts past the end, or before the start, reads or writes nothing real.
    Operands whose index maps cannot be evaluated here are skipped, and so are
    grids sized at run time. Blocks are computed only along the grid axes each
    index map reads, so any grid size works (see `TileMap`).

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
        first: tuple[int, ...] | None = None
        for start, size in zip(entry.starts, operand.shape, strict=True):
            bad = (start >= size) | (start < 0)
            if bad.any():
                # The first program in row-major order whose block misses along `dim`:
                # axes the starts do not vary along (size 1) are at index 0.
                program = tuple(int(v) for v in np.argwhere(bad)[0])
                first = program if first is None else min(first, program)
        if first is None:
            continue
        where = tuple(_at(array, first) for array in entry.starts)
        dim = next(
            d for d, (s, n) in enumerate(zip(where, operand.shape, strict=True)) if s >= n or s < 0
        )
        found.append(StrayBlock(operand, first, where, dim))
    return found


def _at(array: np.ndarray, program: tuple[int, ...]) -> int:
    """One program's value of a compact per-program array (size 1 along axes it ignores)."""
    return int(array[tuple(min(p, n - 1) for p, n in zip(program, array.shape, strict=True))])


def _fmt(shape: Sequence[int | None]) -> str:
    inner = ", ".join("None" if s is None else str(s) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"
