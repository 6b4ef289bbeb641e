"""Copies of an operand's blocks when a grid's programs run one after another (TPU)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from pallaslab._src.geometry.operand_tiles import OperandTiles


def sequential_runs(tiles: OperandTiles, grid: tuple[int, ...]) -> tuple[int, int]:
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
