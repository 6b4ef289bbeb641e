"""Block windows over a grid: which programs touch the same one, along which axes.

The emulator uses `sharing_axes` to decide which grid axes it may run as one batch;
race finding groups the programs writing each window.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pallaslab._src.geometry.limits import check_programs
from pallaslab._src.records import Operand

# Per operand, at most this many distinct windows are compared pairwise when windows
# may overlap without coinciding (element-indexed dimensions); beyond it, conservative.
_PAIRWISE_LIMIT = 2048


def window_sizes(operand: Operand) -> tuple[int, ...]:
    """Elements the operand's block spans per dimension (squeezed dimensions span 1)."""
    return tuple(1 if b is None else int(b) for b in operand.block_shape)


def is_aligned(operand: Operand) -> bool:
    """Whether every block sits on the operand's block grid.

    Blocks then either coincide or are disjoint: true unless a dimension is
    element-indexed.
    """
    return all(k in ("blocked", "squeezed") for k in operand.block_kinds)


def program_coordinates(grid: Sequence[int]) -> np.ndarray:
    """Every program's grid indices, shape (programs, axes), in grid order.

    Grid order is the order the grid runs sequentially: the last axis fastest.
    """
    if not grid:
        return np.zeros((1, 0), np.int64)
    check_programs(grid, "enumerate one by one")
    return np.indices(tuple(grid), dtype=np.int64).reshape(len(grid), -1).T


def group_windows(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups programs by the window they touch.

    Args:
        starts: (programs, dims) first element of each program's window.

    Returns:
        (ids, unique): `ids[p]` numbers program p's window; `unique[ids[p]]` is its
        start. Windows are numbered in order of first use.
    """
    if starts.shape[1] == 0:
        return np.zeros(starts.shape[0], np.int64), np.zeros((1, 0), np.int64)
    unique, first, inverse = np.unique(starts, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    renumber = np.empty_like(order)
    renumber[order] = np.arange(order.size)
    return renumber[inverse.reshape(-1)], unique[order]


def overlapping_pairs(unique: np.ndarray, sizes: Sequence[int]) -> np.ndarray | None:
    """Pairs (u, v), u < v, of distinct windows that share elements.

    None when there are too many windows to compare.
    """
    count = unique.shape[0]
    if count > _PAIRWISE_LIMIT:
        return None
    extent = np.asarray(sizes, dtype=np.int64)
    gap = np.abs(unique[:, None, :] - unique[None, :, :])
    overlap = np.all(gap < extent, axis=-1)
    u, v = np.nonzero(np.triu(overlap, k=1))
    return np.stack([u, v], axis=-1)


def sharing_axes(
    starts: np.ndarray, grid: Sequence[int], sizes: Sequence[int], aligned: bool
) -> tuple[bool, ...]:
    """For each grid axis, whether two programs that differ along it touch one element.

    An axis that shares nothing can run as one batch: its programs' windows are
    disjoint. Element-indexed windows that may overlap are compared pairwise up to a
    limit, and assumed to share beyond it.

    Args:
        starts: (programs, dims) window starts, programs in `program_coordinates` order.
        grid: The grid.
        sizes: Window extent per dimension.
        aligned: Whether windows either coincide or are disjoint (no partial overlap).
    """
    coords = program_coordinates(grid)
    ids, unique = group_windows(starts)
    count = unique.shape[0]
    shared = []
    pairs = None if aligned else overlapping_pairs(unique, sizes)
    for axis in range(len(grid)):
        lo = np.full(count, np.iinfo(np.int64).max)
        hi = np.full(count, np.iinfo(np.int64).min)
        np.minimum.at(lo, ids, coords[:, axis])
        np.maximum.at(hi, ids, coords[:, axis])
        along = bool(np.any(lo != hi))
        if not along and not aligned:
            if pairs is None:
                along = bool(np.unique(coords[:, axis]).size > 1)
            elif pairs.size:
                u, v = pairs[:, 0], pairs[:, 1]
                along = bool(np.any((lo[u] != lo[v]) | (lo[u] != hi[u]) | (lo[v] != hi[v])))
        shared.append(along)
    return tuple(shared)


def block_index(operand: Operand, start: tuple[int, ...]) -> tuple[int, ...]:
    """The block (index in the operand's block grid) holding element `start`.

    Element-indexed dimensions keep the element offset.
    """
    return tuple(
        s // b if kind == "blocked" and b else s
        for s, b, kind in zip(start, operand.block_shape, operand.block_kinds, strict=True)
    )
