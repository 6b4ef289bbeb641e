"""Arrays sent to the widget: compact base64 typed arrays, and shrinking them to fit."""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.views.contracts import EncodedArray

_DTYPES: tuple[tuple[str, Any], ...] = (
    ("u8", np.uint8),
    ("u16", np.uint16),
    ("i16", np.int16),
    ("u32", np.uint32),
    ("i32", np.int32),
)


def encode(values: Any) -> EncodedArray:
    """An integer array as {dtype, shape, data}: little-endian base64, narrowest type."""
    array = np.asarray(values)
    low = int(array.min()) if array.size else 0
    high = int(array.max()) if array.size else 0
    name, kind = "f64", np.float64  # beyond int32: exact up to 2**53
    for candidate, candidate_kind in _DTYPES:
        info = np.iinfo(candidate_kind)
        if info.min <= low and high <= info.max:
            name, kind = candidate, candidate_kind
            break
    dtype: Any = name
    data = np.ascontiguousarray(array, dtype=np.dtype(kind).newbyteorder("<"))
    return {
        "dtype": dtype,
        "shape": [int(n) for n in array.shape],
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
    }


def decode(encoded: EncodedArray) -> np.ndarray:
    """The inverse of `encode` (for tests and tools)."""
    kinds = dict(_DTYPES) | {"f64": np.float64}
    kind = np.dtype(kinds[encoded["dtype"]]).newbyteorder("<")
    raw = base64.b64decode(encoded["data"])
    return np.frombuffer(raw, dtype=kind).reshape(encoded["shape"])


def merge_cells(
    edges: np.ndarray, counts: np.ndarray, axis: int, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """At most `limit` cells along `axis`: neighbours merged, keeping the max count."""
    cells = len(edges) - 1
    if cells <= limit:
        return edges, counts
    group = math.ceil(cells / limit)
    starts = np.arange(0, cells, group)
    merged = np.maximum.reduceat(counts, starts, axis=axis)
    return np.append(edges[starts], edges[-1]), merged


def sampled(array: np.ndarray, stride: Sequence[int]) -> np.ndarray:
    """A compact per-program array at every `stride[a]`-th program along each axis."""
    steps = zip(array.shape, stride, strict=True)
    return array[tuple(slice(None, None, s) if n > 1 else slice(None) for n, s in steps)]


def encoded_bytes(value: object) -> int:
    """Bytes of base64 data in a JSON value (what dominates a pane's size)."""
    if isinstance(value, dict):
        if "data" in value and "dtype" in value:
            return len(value["data"])
        return sum(encoded_bytes(v) for v in value.values())
    if isinstance(value, list):
        return sum(encoded_bytes(v) for v in value)
    return 0


def base64_bytes(array: np.ndarray) -> int:
    """Bytes `encode(array)` takes (base64 of the narrowest integer type)."""
    if not array.size:
        return 0
    low, high = int(array.min()), int(array.max())
    size = next(
        (
            np.dtype(k).itemsize
            for _, k in _DTYPES
            if np.iinfo(k).min <= low <= high <= np.iinfo(k).max
        ),
        8,
    )
    return 4 * math.ceil(array.size * size / 3)


def pool(values: np.ndarray, factors: Sequence[int]) -> np.ndarray:
    out = values
    for axis, factor in enumerate(factors):
        if factor > 1:
            out = np.maximum.reduceat(out, np.arange(0, out.shape[axis], factor), axis=axis)
    return out
