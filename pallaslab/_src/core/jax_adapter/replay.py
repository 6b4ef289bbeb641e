"""A traced program replayed from its jaxpr, and re-traces kept apart in JAX's caches.

An inspection is a snapshot: what it runs and lowers later is the program it traced,
never the user's function traced again with the globals of that later moment.
`replay_function` binds the closed jaxpr's equations again (each with its own source
location), so tracing the replay gives the same program, kernel bodies, index maps and
constants included. Where the arguments' shapes or dtypes differ from the traced ones
the jaxpr cannot serve, and the core re-traces the user's function with its globals
pinned (`core/snapshot.py`) inside `snapshot_scope`: a state of JAX's trace context,
so what JAX caches per trace (jitted functions) is never shared between such a
re-trace and the user's own calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core.jax_adapter.probes import jax_core, trace_state

# The re-trace under way (a token per snapshot, or None): part of JAX's jit key.
_SNAPSHOT = trace_state("pallaslab_snapshot", None)


def replay_function(closed: Any, out_tree: Any) -> Callable[..., Any]:
    """A function over the traced leaves that binds `closed`'s equations again.

    Args:
        closed: The program's closed jaxpr.
        out_tree: The tree structure of the traced function's results.
    """
    jaxpr, consts = closed.jaxpr, list(closed.consts)

    def replay(*leaves: Any) -> Any:
        flat = jax_core.eval_jaxpr(jaxpr, consts, *leaves)
        return jax.tree_util.tree_unflatten(out_tree, flat)

    return replay


def traced_avals(closed: Any) -> tuple[tuple[tuple[int, ...], str], ...]:
    """(shape, dtype) of each argument the program was traced with."""
    return tuple((tuple(a.shape), str(a.dtype)) for a in closed.in_avals)


def same_avals(avals: Sequence[tuple[tuple[int, ...], str]], leaves: Sequence[Any]) -> bool:
    """Whether leaves (arrays, tracers, shapes) have the traced shapes and dtypes."""
    if len(avals) != len(leaves):
        return False
    for (shape, dtype), leaf in zip(avals, leaves, strict=True):
        try:
            found = (tuple(np.shape(leaf)), str(leaf.dtype))
        except (AttributeError, TypeError):
            return False
        if found != (shape, dtype):
            return False
    return True


@contextlib.contextmanager
def snapshot_scope(token: int) -> Iterator[None]:
    """Within the block, JAX keeps what it traces apart under `token` (see above)."""
    if _SNAPSHOT is None:  # pragma: no cover - depends on the JAX version
        yield
        return
    previous = _SNAPSHOT.swap_local(token)
    try:
        yield
    finally:
        _SNAPSHOT.set_local(previous)
