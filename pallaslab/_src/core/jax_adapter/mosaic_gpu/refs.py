"""Refs as a Mosaic GPU body uses them: the transforms on each access, read as plain values.

An equation that touches a ref (a copy, a load, a `wgmma`) carries the ref's
transforms as a pytree (indexers, and the undo-transforms of tiled and swizzled SMEM:
`UnswizzleRef`, `UntilingTransform`). This module turns them into what the walker
needs: the window an access covers in the base array (per program), the shape the
kernel sees, and the transforms in the words a kernel author wrote them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.mosaic_gpu.values import Value
from pallaslab._src.core.jax_adapter.probes import jax_core, state_indexing
from pallaslab._src.records.mosaic_gpu import GpuTransform


def unflatten(treedef: Any, leaves: Sequence[Any]) -> tuple[Any, ...]:
    """Transforms from their treedef and flat leaves (the equation's variables)."""
    if treedef is None:
        return ()
    try:
        found = treedef.unflatten(list(leaves))
    except (TypeError, ValueError):  # an unfamiliar transform refuses variables as leaves
        return ()
    return tuple(found) if isinstance(found, (tuple, list)) else (found,)


def num_leaves(treedef: Any) -> int:
    return int(getattr(treedef, "num_leaves", 0)) if treedef is not None else 0


def split_leaves(leaves: Sequence[Any], treedefs: Sequence[Any]) -> list[tuple[Any, ...]]:
    """The flat transform leaves cut per treedef, each unflattened."""
    found = []
    start = 0
    for treedef in treedefs:
        count = num_leaves(treedef)
        found.append(unflatten(treedef, leaves[start : start + count]))
        start += count
    return found


_NDIndexer: Any = getattr(state_indexing, "NDIndexer", None)
_Slice: Any = getattr(state_indexing, "Slice", None)


def _is_indexer(transform: Any) -> bool:
    return _NDIndexer is not None and isinstance(transform, _NDIndexer)


def _is_slice(index: Any) -> bool:
    return _Slice is not None and isinstance(index, _Slice)


def window(
    shape: Sequence[int],
    transforms: Sequence[Any],
    read: Callable[[Any], Value],
) -> tuple[list[Value], list[int]] | None:
    """The part of an array of `shape` that indexing `transforms` select.

    Returns per dimension of the array the first element (a value per program, or
    None where it depends on data) and the length (1 where an index picks one
    element); None when a transform is not an indexer (a bitcast, a transpose) or
    indexes with an array.
    """
    starts: list[Value] = [np.zeros((), np.int64) for _ in shape]
    sizes = [int(n) for n in shape]
    view = list(range(len(shape)))  # view dimension -> array dimension
    for transform in transforms:
        if not _is_indexer(transform):
            return None
        if tuple(getattr(transform, "int_indexer_shape", ()) or ()):
            return None  # gathers: no single window
        kept = []
        for position, index in enumerate(transform.indices):
            if position >= len(view):
                return None
            dim = view[position]
            if _is_slice(index):
                start, size, stride = read(index.start), index.size, int(index.stride)
                if not isinstance(size, (int, np.integer)):
                    return None  # a run-time length
                base = starts[dim]
                starts[dim] = None if start is None or base is None else base + start * 1
                sizes[dim] = (int(size) - 1) * stride + 1 if size else 0
                kept.append(dim)
            else:
                start = read(index)
                base = starts[dim]
                starts[dim] = None if start is None or base is None else base + start
                sizes[dim] = 1
        view = kept + view[len(transform.indices) :]
    return starts, sizes


def logical_shape(aval: Any, transforms: Sequence[Any]) -> tuple[int, ...] | None:
    """The shape a ref has after `transforms`, as JAX computes it (None if it cannot)."""
    inner = getattr(aval, "inner_aval", aval)
    try:
        current: Any = jax_core.ShapedArray(tuple(inner.shape), inner.dtype)
        for transform in transforms:
            current = transform.transform_type(current)
        return tuple(int(n) for n in current.shape)
    except Exception:  # an unfamiliar transform: the shape is unknown, not wrong
        return None


# Undo-transforms (how a transformed SMEM ref is read back) and what the author wrote.
_WRITTEN = {
    "UnswizzleRef": ("swizzle", "SwizzleTransform"),
    "UntilingTransform": ("tiling", "TilingTransform"),
    "TransposeTransform": ("transpose", "TransposeTransform"),
    "SwizzleTransform": ("swizzle", "SwizzleTransform"),
    "TilingTransform": ("tiling", "TilingTransform"),
}


def written_transforms(transforms: Sequence[Any]) -> tuple[GpuTransform, ...]:
    """The layout transforms among `transforms` (indexers left out), as written.

    An SMEM buffer's own transforms come as their inverses (JAX reads the buffer
    back through them): `UnswizzleRef(128)` is the `SwizzleTransform(128)` the
    kernel asked for. Outermost first, as a `plgpu.BlockSpec` lists them.
    """
    found = []
    for transform in transforms:
        if _is_indexer(transform):
            continue
        name = type(transform).__name__
        kind, written = _WRITTEN.get(name, (name, name))
        values: tuple[int, ...] = ()
        if kind == "swizzle":
            values = (int(transform.swizzle),)
        elif kind == "tiling":
            values = tuple(int(t) for t in transform.tiling)
        elif kind == "transpose":
            values = tuple(int(p) for p in transform.permutation)
        argument = (
            f"({', '.join(map(str, values))},)"
            if len(values) == 1 and kind != "swizzle"
            else f"({', '.join(map(str, values))})"
        )
        text = f"{written}({values[0]})" if kind == "swizzle" else f"{written}({argument})"
        found.append(GpuTransform(kind, values, text if values else written))
    # Inverses come innermost first: the author's order is the reverse.
    return (
        tuple(reversed(found))
        if any(type(t).__name__ in ("UnswizzleRef", "UntilingTransform") for t in transforms)
        else tuple(found)
    )


def memory_space(aval: Any) -> str:
    """A ref's memory space by name: "gmem", "smem", "tmem", "regs", or "default"."""
    space = getattr(aval, "memory_space", None)
    text = str(space).rsplit(".", 1)[-1].lower() if space is not None else ""
    if text in ("", "none", "default"):
        return "default"
    return "gmem" if text in ("any", "hbm") else text


def dtype_name(aval: Any) -> str:
    dtype = getattr(getattr(aval, "inner_aval", aval), "dtype", None)
    return str(getattr(dtype, "name", dtype)) if dtype is not None else ""


def itemsize(aval: Any) -> int:
    dtype = getattr(getattr(aval, "inner_aval", aval), "dtype", None)
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:
        bits = getattr(dtype, "itemsize_bits", None)
        return max(1, int(bits) // 8) if bits else 0
