"""Where the lanes of `ref[indexer]` land, NumPy-style: one rule for both lane walkers.

The interpreter of element accesses (`accesses`, NumPy) and the instrumented body
(`instrument`, traced with jnp) both follow each lane of an `NDIndexer`: a slice
gives a run of indices along its own axis, integer indexers broadcast together.
Where those axes land in the result is NumPy's advanced-indexing rule, kept here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def result_layout(is_slice: Sequence[bool], int_shape: Sequence[int]) -> list[list[int]]:
    """Per indexer dimension, the shape its index array takes in `x[indexer]`.

    Slices keep their order; the broadcast shape of the integer indexers takes the
    place of the first of them when they are contiguous, and leads the result when
    they are apart (NumPy's rule).

    Args:
        is_slice: Per dimension, whether the indexer is a slice (else an integer
            array or scalar).
        int_shape: The integer indexers' broadcast shape (() when there are none).

    Returns:
        Per dimension: for a slice, the shape its 1-D index array is reshaped to
        (-1 along its result axis); for an integer indexer, the shape its array,
        broadcast to `int_shape`, is reshaped to. All broadcast together.
    """
    int_positions = [k for k, flag in enumerate(is_slice) if not flag]
    slice_dims = [k for k, flag in enumerate(is_slice) if flag]
    layout: list[int | str]
    if not int_positions:
        layout = list(slice_dims)
    elif int_positions == list(range(int_positions[0], int_positions[-1] + 1)):
        first = int_positions[0]
        layout = [k for k in slice_dims if k < first] + ["int"]
        layout += [k for k in slice_dims if k > first]
    else:
        layout = ["int", *slice_dims]
    int_rank = len(int_shape)
    out_rank = sum(int_rank if item == "int" else 1 for item in layout)
    axis_of: dict[int, int] = {}
    int_axis = position = 0
    for item in layout:
        if item == "int":
            int_axis = position
            position += int_rank
        else:
            axis_of[int(item)] = position
            position += 1
    int_target = [1] * int_axis + list(int_shape) + [1] * (out_rank - int_axis - int_rank)
    return [
        [-1 if a == axis_of[k] else 1 for a in range(out_rank)] if flag else list(int_target)
        for k, flag in enumerate(is_slice)
    ]


def lane_indices(
    per_dim: Sequence[tuple[Any, bool]], int_shape: Sequence[int], xp: Any
) -> tuple[list[Any], list[list[int]]]:
    """Per indexer dimension, the index each lane of `x[indexer]` takes along it.

    Args:
        per_dim: Per dimension, its indices (a slice's run, or an integer indexer's
            array) and whether it is a slice.
        int_shape: The integer indexers' broadcast shape (() when there are none).
        xp: The array module the indices are in: `numpy` or `jax.numpy`.

    Returns:
        The index arrays, all of the result's shape, and `result_layout`'s targets
        (a slice's result axis is where its target holds -1).
    """
    targets = result_layout([sliced for _, sliced in per_dim], int_shape)
    arrays = []
    for (values, sliced), target in zip(per_dim, targets, strict=True):
        lanes = values
        if not sliced:
            lanes = xp.broadcast_to(values, tuple(int_shape)) if int_shape else values.reshape(())
        arrays.append(lanes.reshape(target))
    out_rank = len(targets[0]) if targets else 0
    out_shape = (
        tuple(np.broadcast_shapes(*(a.shape for a in arrays), (1,) * out_rank)) if arrays else ()
    )
    return [xp.broadcast_to(a, out_shape) for a in arrays], targets
