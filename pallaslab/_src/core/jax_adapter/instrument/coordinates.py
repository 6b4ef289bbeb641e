"""Lane coordinates: for each lane of a load or store, the element of the ref it touches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter.lanes import lane_indices
from pallaslab._src.core.jax_adapter.probes import state_indexing

_NDIndexer: Any = getattr(state_indexing, "NDIndexer", None)
_Slice: Any = getattr(state_indexing, "Slice", None)


def lane_coordinates(
    transforms: Sequence[Any], shape: tuple[int, ...]
) -> tuple[list[Any], list[tuple[Any, int]] | None] | None:
    """Per ref dimension, the coordinate each lane touches (past the view's edges too).

    Also, for a single indexer of slices and scalars (which the discharge does with a
    dynamic slice, clamping its start), each dimension's (start, extent); else None.
    None for views the lanes of which are not followed (bitcasts, reshapes).
    """
    if not transforms:
        grids = [jnp.asarray(g) for g in np.indices(shape, dtype=np.int32)] if shape else []
        return grids, None
    if not all(isinstance(t, _NDIndexer) for t in transforms):
        return None
    coords: list[Any] | None = None
    steps: list[tuple[int, ...] | None] = []
    for indexer in transforms:
        coords, steps = _apply_indexer(coords, steps, indexer, len(shape))
    starts: list[tuple[Any, int]] | None = None
    if len(transforms) == 1:
        starts = []
        for index in transforms[0].indices:
            if isinstance(index, _Slice):
                starts.append((index.start, (int(index.size) - 1) * int(index.stride) + 1))
            elif not jnp.shape(index):
                starts.append((index, 1))
            else:
                starts = None
                break
    return list(coords or []), starts


def window_of(transforms: Sequence[Any], shape: tuple[int, ...]) -> list[tuple[Any, Any]] | None:
    """Per dimension, the first and last element a single indexer selects.

    For an indexer of slices and scalars (int32 values); None for other views (arrays,
    chains, bitcasts).
    """
    if len(transforms) != 1 or not isinstance(transforms[0], _NDIndexer):
        return None
    window = []
    for index in transforms[0].indices:
        if isinstance(index, _Slice):
            start = jnp.asarray(index.start, jnp.int32)
            window.append((start, start + (int(index.size) - 1) * int(index.stride)))
        elif not jnp.shape(index):
            value = jnp.asarray(index, jnp.int32)
            window.append((value, value))
        else:
            return None
    return window if len(window) == len(shape) else None


def _apply_indexer(
    coords: list[Any] | None,
    steps: list[tuple[int, ...] | None],
    indexer: Any,
    rank: int,
) -> tuple[list[Any], list[tuple[int, ...] | None]]:
    """The lanes of `view[indexer]`, NumPy-style, as `NDIndexer` defines them.

    `coords` None stands for the whole ref (each lane's coordinate is its index).
    """
    per_dim: list[tuple[Any, bool]] = []
    strides: list[int] = []
    # With an array among the indices, the discharge gathers (`x[arrays]`), and integer
    # indices count from the end when negative, as NumPy's do; with only slices and
    # scalars it slices dynamically, and a negative start is clamped (see `effective`).
    gathers = any(not isinstance(i, _Slice) and jnp.shape(i) for i in indexer.indices)
    ref_shape = tuple(int(n) for n in getattr(indexer, "shape", ()))
    for dim, index in enumerate(indexer.indices):
        if isinstance(index, _Slice):
            size, stride = int(index.size), int(index.stride)
            start = jnp.asarray(index.start, jnp.int32)
            per_dim.append((start + stride * jnp.arange(size, dtype=jnp.int32), True))
            strides.append(stride)
        else:
            value = jnp.asarray(index, jnp.int32)
            if gathers and dim < len(ref_shape):
                value = jnp.where(value < 0, value + ref_shape[dim], value)
            per_dim.append((value, False))
            strides.append(0)
    int_shape = (
        tuple(int(n) for n in indexer.int_indexer_shape) if not all(s for _, s in per_dim) else ()
    )
    arrays, targets = lane_indices(per_dim, int_shape, jnp)
    out_rank = len(targets[0]) if targets else 0
    view_shape = tuple(int(n) for n in indexer.shape)
    new_coords = []
    if coords is None:  # the whole ref: a lane's coordinate is its index
        new_coords = list(arrays)
        base_steps: list[tuple[int, ...] | None] = [
            tuple(1 if d == k else 0 for d in range(rank)) for k in range(rank)
        ]
    else:
        clipped = [jnp.clip(a, 0, max(n - 1, 0)) for a, n in zip(arrays, view_shape, strict=True)]
        base_steps = steps
        for d in range(rank):
            base = coords[d][tuple(clipped)] if clipped else coords[d]
            for k, (a, c) in enumerate(zip(arrays, clipped, strict=True)):
                step = steps[k]
                if step is not None and step[d]:
                    base = base + (a - c) * step[d]
            new_coords.append(jnp.asarray(base, jnp.int32))
    new_steps: list[tuple[int, ...] | None] = [None] * out_rank
    for k, (_, sliced) in enumerate(per_dim):
        old = base_steps[k] if k < len(base_steps) else None
        if sliced and old is not None:
            new_steps[targets[k].index(-1)] = tuple(strides[k] * s for s in old)
    return new_coords, new_steps


def effective(
    coords: list[Any],
    starts: list[tuple[Any, int]] | None,
    shape: tuple[int, ...],
    *,
    masked: bool,
) -> list[Any]:
    """The elements an access really touched in the emulation.

    Masked accesses drop lanes outside the ref (Pallas pads for them); an unmasked
    dynamic slice is clamped to fit, as `lax.dynamic_slice` does.
    """
    if masked:
        return coords
    if starts is None:
        return [jnp.clip(c, 0, max(n - 1, 0)) for c, n in zip(coords, shape, strict=True)]
    shifted = []
    for c, (given, extent), n in zip(coords, starts, shape, strict=True):
        start = jnp.asarray(given, jnp.int32)
        clamped = jnp.clip(start, 0, max(n - extent, 0))
        shifted.append(c + (clamped - start))
    return shifted
