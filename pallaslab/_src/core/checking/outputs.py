"""What the checks share: outputs compared elementwise, and where differences lie.

The tiles (block indices) a difference lies in, and a ref's label for the records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter import emulation as adapter


def differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the values differ (NaN equals NaN, also in bfloat16 and float8)."""
    if is_inexact(a.dtype):
        both_nan = np.isnan(a) & np.isnan(b)
        return np.asarray(~((a == b) | both_nan))
    return np.asarray(a != b)


def is_inexact(dtype: np.dtype) -> bool:
    """Floating or complex, ml_dtypes' too (bfloat16, float8: NumPy kind "V")."""
    return bool(jnp.issubdtype(dtype, jnp.inexact))


def is_number(dtype: np.dtype) -> bool:
    """Any numeric dtype (booleans excluded), ml_dtypes' too."""
    return bool(jnp.issubdtype(dtype, jnp.number))


def agreement(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> tuple[bool, float]:
    """Whether outputs are equal bit for bit (NaN equals NaN); the largest difference.

    The difference is inf where shapes or dtypes differ or NaN or Inf is on one side
    only; for non-numbers, the count of differing elements.
    """
    agrees, worst = True, 0.0
    for got_output, wanted in zip(got, want, strict=True):
        a, b = np.asarray(got_output), np.asarray(wanted)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, math.inf
        mask = differs(a, b)
        if not mask.any():
            continue
        agrees = False
        if is_number(b.dtype):
            diff = np.abs(a[mask].astype(np.float64) - b[mask].astype(np.float64))
            worst = max(worst, math.inf if not np.isfinite(diff).all() else float(diff.max()))
        else:
            worst = max(worst, float(mask.sum()))
    return agrees, worst


def tiles_of(mask: np.ndarray, layout: adapter.BlockLayout) -> list[tuple[int, ...]]:
    """Tiles (block indices) holding a True element, in order."""
    if not mask.any():
        return []
    lows = [lo for lo, _ in layout.padding]
    padded = np.zeros(layout.padded_shape, bool)
    padded[tuple(slice(lo, lo + d) for lo, d in zip(lows, layout.shape, strict=True))] = mask
    split: list[int] = []
    for extent, size in zip(layout.padded_shape, layout.block, strict=True):
        split += [extent // size, size]
    tiles = padded.reshape(split).any(axis=tuple(range(1, len(split), 2)))
    return [tuple(int(v) for v in t) for t in np.argwhere(tiles)]


def ref_label(call: adapter.KernelCall, position: int) -> str:
    operands = call.record.operands
    if 0 <= position < len(operands):
        return operands[position].label
    return "a scoped buffer" if position == -1 else "a ref"
