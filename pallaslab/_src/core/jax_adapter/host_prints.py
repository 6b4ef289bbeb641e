"""`pl.debug_print` and `jax.debug.callback` in an emulated kernel body, at scale.

JAX batches these primitives by unrolling them: `vmap` over 10^5 programs binds 10^5
callbacks into the program, which then takes minutes to compile, and an unordered
`io_callback` would call the host once per program. The emulator binds each print as
a `custom_vmap` function instead: batched, it calls the host once with the values of
every program of the batch, and the host prints them program by program (in the
batch's row-major order, which is grid order), doing what the primitive does (JAX's
own formatting, the user's own callback).
"""

from __future__ import annotations

import functools
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental import io_callback

try:
    from jax._src import debugging
except ImportError:  # pragma: no cover - prints then go through the primitive's impl
    debugging = None  # type: ignore[assignment]

__all__ = ["HOST_PRINTS", "is_host_print", "rolled_host_print"]

# Primitives JAX batches by unrolling (`debugging.debug_batching_rule`).
HOST_PRINTS = frozenset({"debug_print", "debug_callback"})


def is_host_print(eqn: Any) -> bool:
    """Whether the equation is an unordered debug print or callback."""
    if eqn.primitive.name not in HOST_PRINTS or eqn.outvars:
        return False
    params = eqn.params
    if params.get("ordered"):
        return False
    effect = params.get("effect")
    return effect is None or "Ordered" not in type(effect).__name__


def rolled_host_print(eqn: Any, values: list[Any]) -> list[Any]:
    """Binds the print so that `vmap` calls the host once per batch, not per program."""
    # A last value that is always there: it carries the batch of a print of no value.
    _printer(_Primitive(eqn.primitive, eqn.params), 0)(*values, jnp.zeros((), jnp.int8))
    return []


class _Primitive:
    """A print primitive and its parameters: what the host does, hashable by identity.

    A `debug_print` formats NumPy values as JAX's own print callback does, without
    the round trip through device arrays its `impl` makes for every call (most of
    the time of a print); anything else runs the primitive's `impl`.
    """

    def __init__(self, primitive: Any, params: Any) -> None:
        self.primitive = primitive
        self.params = dict(params)
        self.fast = _fast_print(self.params) if primitive.name == "debug_print" else None

    def __call__(self, *arrays: Any) -> None:
        if self.fast is not None:
            self.fast(*arrays)
        else:
            self.primitive.impl(*arrays, **self.params)


def _fast_print(params: dict[str, Any]) -> Any:
    """JAX's own print callback for a `debug_print`'s parameters (None if unreadable)."""
    format_print = getattr(debugging, "_format_print_callback", None)
    make_flat = getattr(debugging, "_make_flat_callback", None)
    needed = ("fmt", "np_printoptions", "has_placeholders", "logging_record", "in_tree")
    if format_print is None or make_flat is None or not all(k in params for k in needed):
        return None
    callback = functools.partial(
        format_print,
        params["fmt"],
        dict(params["np_printoptions"]),
        params["has_placeholders"],
        params["logging_record"],
    )
    return make_flat(params["in_tree"], callback, params.get("static_args", ()))


@functools.lru_cache(maxsize=256)
def _printer(what: _Primitive, batch_ndim: int) -> Any:
    """Prints values whose `batch_ndim` leading axes are programs, one program at a time."""

    def host(*arrays: Any) -> None:
        *values, carrier = (np.asarray(a) for a in arrays)
        for index in np.ndindex(*carrier.shape[:batch_ndim]):
            what(*(v[index] for v in values))

    @custom_vmap
    def emit(*values: Any) -> tuple[()]:
        io_callback(host, None, *values, ordered=False)
        return ()

    @emit.def_vmap
    def batched(axis_size: int, in_batched: Any, *values: Any) -> Any:
        spread = [
            v if b else jnp.broadcast_to(v, (axis_size, *jnp.shape(v)))
            for v, b in zip(values, in_batched, strict=True)
        ]
        _printer(what, batch_ndim + 1)(*spread)
        return (), ()

    return emit
