"""Shorthands the catalog's modules share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pallaslab._src.course.spec import Case


def f32(*shape: int) -> jax.ShapeDtypeStruct:
    """Seeded random float32 data of this shape."""
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def bf16(*shape: int) -> jax.ShapeDtypeStruct:
    """Seeded random bfloat16 data of this shape."""
    return jax.ShapeDtypeStruct(shape, jnp.bfloat16)


def case(*args: Any, label: str = "", **kwargs: Any) -> Case:
    """A case with these arguments (kept as given) and keyword arguments."""
    return Case(make=lambda: args, kwargs=kwargs, label=label)


def made(make: Callable[[], tuple[Any, ...]], label: str = "", **kwargs: Any) -> Case:
    """A case whose arguments `make()` builds (for inputs that are not random normal)."""
    return Case(make=make, kwargs=kwargs, label=label)


def normal(seed: int, *shape: int, scale: float = 1.0, shift: float = 0.0) -> jax.Array:
    """Deterministic normal data: `shift + scale * N(0, 1)`."""
    rng = np.random.default_rng(seed)
    return jnp.asarray(shift + scale * rng.standard_normal(shape), jnp.float32)
