"""How many programs' blocks cover each element of an operand, run-length compressed.

The array is cut along every dimension at every block boundary (`Coverage.edges`);
within a cell the count is constant, so a 256 x 256 grid over a 16384 x 16384 array
counts in milliseconds and expands to one number per element only when asked.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Mapping

import numpy as np

from pallaslab._src.geometry.operand_tiles import OperandTiles, clipped_bounds, reduced_grid

# Cells of a compressed coverage beyond which counting is refused (memory).
_MAX_CELLS = 1 << 27


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


def coverage_of(tiles: OperandTiles, grid: tuple[int, ...]) -> Coverage:
    """Counts by a difference array over the compressed cells: O(programs * 2^rank)."""
    shape = tiles.operand.shape
    sub, weight = reduced_grid(tiles, grid)
    if not shape:
        return Coverage((), (), np.asarray(math.prod(grid), dtype=np.int64))
    bounds = [(lo.ravel(), hi.ravel()) for lo, hi in clipped_bounds(tiles, sub)]
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
