"""Blocks of operands, traced: padding, window starts, gathering and writing back."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pallaslab._src.core.emulator.plans import clamped_starts
from pallaslab._src.core.jax_adapter import emulation as adapter


def fill_value(dtype: Any, fill: str) -> Any:
    """The value padding and unwritten buffers hold.

    Pallas' (NaN, smallest integer, False) or, for "alt", a different ordinary value
    (for finding what depends on them).
    """
    if fill != "alt":
        return adapter.uninitialized_value(dtype)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array(True)
    # jnp's predicates and iinfo know ml_dtypes' narrow integers (int4, uint4, int2),
    # which NumPy calls "V": 7, or the largest value when that is less.
    if jnp.issubdtype(dtype, jnp.integer):
        return np.array(min(7, int(jnp.iinfo(dtype).max)), dtype)
    return np.array(0.5, dtype)


def pad(value: Any, layout: adapter.BlockLayout, fill: Any) -> Any:
    value = jnp.asarray(value, layout.dtype)
    config = [
        (lo, padded - dim - lo, 0)
        for dim, padded, (lo, _) in zip(
            layout.shape, layout.padded_shape, layout.padding, strict=True
        )
    ]
    if all(lo == 0 and hi == 0 for lo, hi, _ in config):
        return value
    return lax.pad(value, jnp.asarray(fill, layout.dtype), config)


def unpad(value: Any, layout: adapter.BlockLayout) -> Any:
    lows = [lo for lo, _ in layout.padding]
    if value.shape == layout.shape:
        return value
    return lax.slice(value, lows, [lo + d for lo, d in zip(lows, layout.shape, strict=True)])


def starts_of(call: adapter.KernelCall, k: int, pids: np.ndarray, scalars: Sequence[Any]) -> Any:
    """Window starts (programs, dims) for the given programs.

    NumPy when the index map is evaluable ahead of time, else computed with JAX
    (scalar prefetch).
    """
    layout = call.layouts[k]
    operand = call.record.operands[call.num_scalars + k]
    index_map = operand.index_map
    limit = np.maximum(np.asarray(layout.padded_shape) - np.asarray(layout.block), 0)
    if index_map is not None and index_map.evaluable and not index_map.uses_prefetch:
        if not call.grid:
            static = clamped_starts(call, k).reshape(1, -1)
            return np.broadcast_to(static, (pids.shape[0], static.shape[1]))
        indices = index_map.evaluate([pids[:, a] for a in range(pids.shape[1])])
        starts = (
            np.stack(
                [
                    ix if (layout.element[d] or layout.squeezed[d]) else ix * layout.block[d]
                    for d, ix in enumerate(indices)
                ],
                axis=-1,
            )
            if indices
            else np.zeros((pids.shape[0], 0), np.int64)
        )
        return np.clip(starts, 0, limit)
    columns = [jnp.asarray(pids[:, a], jnp.int32) for a in range(pids.shape[1])]
    in_axes = (0,) * len(columns) + (None,) * len(scalars)
    traced: Sequence[Any]
    if columns:
        traced = jax.vmap(layout.index_map, in_axes=in_axes)(*columns, *scalars)
    else:
        traced = [
            jnp.broadcast_to(jnp.asarray(i), (pids.shape[0],)) for i in layout.index_map(*scalars)
        ]
    stacked = jnp.stack(
        [
            jnp.asarray(ix, jnp.int32)
            * (1 if (layout.element[d] or layout.squeezed[d]) else layout.block[d])
            for d, ix in enumerate(traced)
        ],
        axis=-1,
    )
    return jnp.clip(stacked, 0, jnp.asarray(limit, jnp.int32))


def _squeeze_axes(layout: adapter.BlockLayout) -> tuple[int, ...]:
    return tuple(d + 1 for d, s in enumerate(layout.squeezed) if s)


def _tiling(shape: Sequence[int], starts: Any, block: Sequence[int]) -> tuple[int, ...] | None:
    """Blocks per dimension when `starts` cut `shape` into its blocks in order.

    `starts` is (lanes, dims): each block once, in row-major order. None otherwise,
    or when `starts` is known only when the program runs.
    """
    if any(int(n) % int(b) for n, b in zip(shape, block, strict=True)):
        return None
    try:
        known = np.asarray(starts)
    except Exception:  # traced: known only when it runs
        return None
    counts = tuple(int(n) // int(b) for n, b in zip(shape, block, strict=True))
    if known.ndim != 2 or known.shape[0] != math.prod(counts) or known.shape[0] < 2:
        return None
    grid = np.indices(counts).reshape(len(counts), -1).T * np.asarray(block, np.int64)
    return counts if np.array_equal(known, grid) else None


def _untiled(blocks: Any, counts: tuple[int, ...], block: Sequence[int]) -> Any:
    """Blocks (lanes, *block) in row-major order, laid out as the array they tile."""
    ndim = len(block)
    split = blocks.reshape((*counts, *block))
    order = [axis for d in range(ndim) for axis in (d, ndim + d)]
    return split.transpose(order).reshape([c * int(b) for c, b in zip(counts, block, strict=True)])


def _tiled(source: Any, counts: tuple[int, ...], block: Sequence[int]) -> Any:
    """The array as its blocks (lanes, *block), in row-major order."""
    ndim = len(block)
    split = source.reshape([n for c, b in zip(counts, block, strict=True) for n in (c, int(b))])
    order = [2 * d for d in range(ndim)] + [2 * d + 1 for d in range(ndim)]
    return split.transpose(order).reshape((math.prod(counts), *block))


def gather(source: Any, starts: Any, layout: adapter.BlockLayout) -> Any:
    """Blocks at `starts` (*lanes, dims), stacked: (*lanes, *kernel block shape).

    Blocks that tile the array in row-major order are the array reshaped (no copy of
    it where only leading dimensions are cut).
    """
    lanes = starts.shape[:-1]
    # An explicit count: a 0-d operand's starts are (*lanes, 0), which -1 cannot size.
    flat = starts.reshape((math.prod(lanes), starts.shape[-1]))
    counts = _tiling(source.shape, flat, layout.block)
    if counts is not None:
        blocks = lax.squeeze(_tiled(source, counts, layout.block), _squeeze_axes(layout))
        return blocks.reshape((*lanes, *layout.kernel_block_shape))
    if flat.shape[0] == 1 and not lanes:
        blocks = lax.dynamic_slice(source, list(flat[0]), layout.block)[None]
    else:
        blocks = jax.vmap(lambda s: lax.dynamic_slice(source, list(s), layout.block))(flat)
    blocks = lax.squeeze(blocks, _squeeze_axes(layout))
    return blocks.reshape((*lanes, *layout.kernel_block_shape))


def scatter(target: Any, starts: Any, blocks: Any, layout: adapter.BlockLayout) -> Any:
    """Writes disjoint blocks (lanes, *kernel block shape) at `starts` into `target`."""
    lanes = blocks.shape[0]
    if lanes == 1:
        return lax.dynamic_update_slice(target, blocks.reshape(layout.block), list(starts[0]))
    full = blocks.reshape((lanes, *layout.block))
    counts = _tiling(target.shape, starts, layout.block)
    if counts is not None:  # every block once, in order: the blocks are the array
        return _untiled(full, counts, layout.block)
    ndim = len(layout.block)
    numbers = lax.ScatterDimensionNumbers(
        update_window_dims=tuple(range(1, ndim + 1)),
        inserted_window_dims=(),
        scatter_dims_to_operand_dims=tuple(range(ndim)),
    )
    return lax.scatter(
        target,
        starts,
        full,
        numbers,
        indices_are_sorted=False,
        unique_indices=True,
        mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )


def write_in_order(
    target: Any,
    starts: Any,
    blocks: Any,
    valid: Any,
    layout: adapter.BlockLayout,
    *,
    masks: tuple[Any, Any, Any] | None = None,
) -> Any:
    """Writes each lane's block in lane order (later lanes win); skips invalid lanes.

    With `masks` (stored, atomically updated, the block as the lane read it), a lane
    writes only the elements it stored, and adds what its atomic updates added.
    """
    full = blocks.reshape((blocks.shape[0], *layout.block))
    if masks is not None:
        stored, atomic, before = (m.reshape(full.shape) for m in masks)
    for lane in range(full.shape[0]):
        where = list(starts[lane])
        current = lax.dynamic_slice(target, where, layout.block)
        if masks is None:
            block = jnp.where(valid[lane], full[lane], current)
        else:
            added = current + (full[lane] - before[lane]) if current.dtype != bool else current
            merged = jnp.where(stored[lane], full[lane], jnp.where(atomic[lane], added, current))
            block = jnp.where(valid[lane], merged, current)
        target = lax.dynamic_update_slice(target, block, where)
    return target
