"""One operand's blocks over a grid (`OperandTiles`), and sizes derived from them.

Counting happens on the smallest grid that tells the operand's programs apart: the
grid restricted to the axes its block depends on (`reduced_grid`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import numpy as np

from pallaslab._src.records import Operand

# How an operand reaches the kernel.
#   pipelined: BlockSpec blocks copied between HBM and VMEM / shared memory.
#   prefetch:  a scalar-prefetch operand, copied whole to SMEM once, before the grid.
#   manual:    left in HBM or host memory (`pl.ANY`, `pl.HOST`, mesh kernels): the body
#              copies what it needs.
#   scratch:   a kernel-local buffer, never in HBM.
#   unmapped:  its index map could not be evaluated here (see `reason`).
Access = Literal["pipelined", "prefetch", "manual", "scratch", "unmapped"]


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


def reduced_grid(tiles: OperandTiles, grid: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """The grid restricted to the axes the block depends on, and the repeat count.

    Programs that differ only along other axes see the same block, so each point of
    the reduced grid stands for `weight` programs.
    """
    axes = tiles.axes
    sub = tuple(n if a in axes else 1 for a, n in enumerate(grid))
    weight = math.prod(n for a, n in enumerate(grid) if a not in axes)
    return sub, weight


def clipped_bounds(
    tiles: OperandTiles, sub: tuple[int, ...]
) -> list[tuple[np.ndarray, np.ndarray]]:
    bounds = []
    for start, extent, n in zip(tiles.starts, tiles.extents, tiles.operand.shape, strict=True):
        lo = np.clip(np.broadcast_to(start, sub), 0, n)
        hi = np.clip(np.broadcast_to(start + extent, sub), 0, n)
        bounds.append((lo, np.maximum(hi, lo)))
    return bounds


def clipped_size(tiles: OperandTiles, sub: tuple[int, ...]) -> np.ndarray:
    size = np.ones(sub, dtype=np.int64)
    for lo, hi in clipped_bounds(tiles, sub):
        size = size * (hi - lo)
    return size
