"""Where each program's block of an operand starts, and blocks that miss their array."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from pallaslab._src.records import Kernel, Operand


def grid_indices(grid: Sequence[int]) -> list[np.ndarray]:
    """One array per grid axis, each of shape `grid`, enumerating every program."""
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
    skipped.

    Returns:
        At most one `StrayBlock` per operand: its first offending program.
    """
    found = []
    for operand in kernel.operands:
        if operand.index_map is None or not operand.index_map.evaluable:
            continue
        if operand.index_map.uses_prefetch and not prefetch:
            continue
        starts = block_starts(operand, kernel.grid, prefetch)
        sizes = _extents(operand, kernel.grid, prefetch, starts.shape)
        padding = np.asarray(_padding(operand), dtype=np.int64).reshape(-1, 2)
        first = -padding[:, 0]
        end = np.asarray(operand.shape, dtype=np.int64) + padding[:, 1]
        bad = (starts >= end) | (starts + sizes <= first)
        if not bad.any():
            continue
        where = np.argwhere(bad)[0]
        program, dim = tuple(int(v) for v in where[:-1]), int(where[-1])
        found.append(
            StrayBlock(
                operand,
                program,
                tuple(int(v) for v in starts[program]),
                dim,
                int(sizes[(*program, dim)]),
            )
        )
    return found


def _padding(operand: Operand) -> tuple[tuple[int, int], ...]:
    """Per dimension, the `pl.Element` padding (low, high) Pallas adds around the array."""
    return operand.element_padding or ((0, 0),) * len(operand.shape)


def _extents(
    operand: Operand, grid: Sequence[int], prefetch: Sequence[np.ndarray], shape: tuple[int, ...]
) -> np.ndarray:
    """Each program's block extent per dimension: the block size, or a slice's size."""
    sizes = np.empty(shape, dtype=np.int64)
    for d, size in enumerate(operand.block_shape):
        sizes[..., d] = 1 if size is None else size
    if operand.index_map is not None and operand.index_map.sizes:
        sliced = operand.index_map.evaluate_sizes(grid_indices(grid), prefetch)
        for d, value in enumerate(sliced):
            if value is not None:
                # A bounded slice's size is dynamic, at least 1 element.
                sizes[..., d] = np.maximum(np.broadcast_to(value, shape[:-1]), 1)
    return sizes


def _fmt(shape: Sequence[int | None]) -> str:
    inner = ", ".join("None" if s is None else str(s) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"
