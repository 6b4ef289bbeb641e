"""Seeded random inputs for arguments given as shapes (`jax.ShapeDtypeStruct`).

A run, a check, a sweep, a tile map's prefetch values and a reproducer all make the
same arrays from the same shapes, so what one shows is what another computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np


def example_arrays(specs: Sequence[Any], seed: int = 0) -> list[Any]:
    """Concrete arrays for example arguments: `ShapeDtypeStruct`s become seeded data.

    Floating inputs are standard normal; integer inputs are small non-negative
    integers (they are often indices); booleans are fair coin flips.
    """
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        if not isinstance(spec, jax.ShapeDtypeStruct):
            arrays.append(spec)
            continue
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f" or dtype.name == "bfloat16":
            value = rng.standard_normal(spec.shape, dtype=np.float32)
        elif dtype.kind in "iu":
            value = rng.integers(0, 4, spec.shape)
        elif dtype.kind == "b":
            value = rng.random(spec.shape) < 0.5
        else:
            value = rng.standard_normal(spec.shape)
        arrays.append(jax.numpy.asarray(value, dtype=spec.dtype))
    return arrays


def materialize(tree: Any, seed: int) -> Any:
    """`ShapeDtypeStruct` leaves of any pytree become seeded random arrays; others stay."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return jax.tree_util.tree_unflatten(treedef, example_arrays(leaves, seed=seed))
