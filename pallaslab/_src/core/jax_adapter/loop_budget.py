"""Loops in emulated and interpreted kernels that can be stopped: the run budget.

A `while_loop` whose condition never turns false runs inside XLA, where no signal
reaches it: the cell seems to stop on an interrupt, but the computation goes on and
every later computation queues behind it. So every `while` loop the emulator and
pallaslab's interpreter rewrite is bounded (`bounded_while_loop`): it runs in chunks
(the first of `FIRST_CHUNK` iterations, then up to `CHUNK`), and between chunks a
host callback (`_poll`) is asked whether to go on. It stops the loop when the loop
has run the budget's iterations, when the run's deadline has passed, or when a stop
was requested (an interrupt), and notes which loop, at which source line, after how
many iterations (`take_stops`). A loop that ends within its first chunk never calls
the host: its cost is one counter.

Under `vmap` (the emulator batches programs), the poll sees every program of the
batch at once and is called only when one of them is still looping (`custom_vmap`
keeps its condition unbatched), so a batched loop costs one callback per chunk.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_batching import custom_vmap

__all__ = [
    "CHUNK",
    "DEFAULT_ITERATIONS",
    "FIRST_CHUNK",
    "LoopStop",
    "bounded_while_loop",
    "clear_stop",
    "limits",
    "request_stop",
    "set_limits",
    "stop_requested",
    "take_stops",
]

#: Iterations a bounded loop runs before it first asks the host whether to go on.
FIRST_CHUNK = 1_000
#: Iterations between later questions.
CHUNK = 100_000
#: Iterations one loop may run by default.
DEFAULT_ITERATIONS = 10_000_000
# Totals are int32 in the loop: a budget stays below this.
_MAX_ITERATIONS = 2**31 - 1 - CHUNK


@dataclasses.dataclass(frozen=True)
class LoopStop:
    """A loop the budget stopped.

    Attributes:
        file: The source file of its `while_loop` (or `fori_loop`).
        line: Its line ("" file, 0 line when unknown).
        iterations: How many iterations it had run (the most of any program).
        reason: "iterations" (the budget's), "seconds" (the run's wall-clock limit),
            or "interrupt".
    """

    file: str
    line: int
    iterations: int
    reason: str


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.iterations = DEFAULT_ITERATIONS
        self.deadline: float | None = None
        self.stop_reason = ""
        self.stops: dict[tuple[str, int, str], int] = {}


_state = _State()


def set_limits(iterations: int, deadline: float | None) -> None:
    """The budget loops follow from now on: iterations per loop, a `time.monotonic()`."""
    with _state.lock:
        _state.iterations = max(FIRST_CHUNK, min(int(iterations), _MAX_ITERATIONS))
        _state.deadline = deadline


def limits() -> tuple[int, float | None]:
    """The iterations per loop and the deadline in force."""
    with _state.lock:
        return _state.iterations, _state.deadline


def request_stop(reason: str) -> None:
    """Every bounded loop stops at its next question (e.g. "interrupt")."""
    with _state.lock:
        _state.stop_reason = reason


def stop_requested() -> str:
    """The reason a stop was requested ("" when none was)."""
    with _state.lock:
        return _state.stop_reason


def clear_stop() -> None:
    """Loops go on again (after the stopped computation has ended)."""
    with _state.lock:
        _state.stop_reason = ""


def take_stops() -> list[LoopStop]:
    """The loops stopped since the last call, longest first; forgets them."""
    with _state.lock:
        found, _state.stops = _state.stops, {}
    stops = [LoopStop(f, line, n, reason) for (f, line, reason), n in found.items()]
    return sorted(stops, key=lambda s: -s.iterations)


def _poll(file: str, line: int, still: Any, total: Any) -> tuple[np.ndarray, np.ndarray]:
    """The host's answer between chunks: iterations allowed next, and which lanes stop."""
    still = np.asarray(still, bool)
    total = np.asarray(total, np.int64)
    with _state.lock:
        bound = _state.iterations
        reason = _state.stop_reason
        if not reason and _state.deadline is not None and time.monotonic() > _state.deadline:
            reason = "seconds"
        if reason:
            stopped = still.copy()
        else:
            stopped = still & (total >= bound)
            reason = "iterations"
        if stopped.any():
            key = (file, line, reason)
            ran = int(total[stopped].max())
            _state.stops[key] = max(_state.stops.get(key, 0), ran)
    allowed = np.clip(bound - total, 0, CHUNK).astype(np.int32)
    return np.where(stopped, 0, allowed).astype(np.int32), stopped


@functools.cache
def _maybe_poll(file: str, line: int, batch_ndim: int) -> Callable[..., Any]:
    """Asks the host only when some program is still looping (`batch_ndim` batch axes)."""

    @custom_vmap
    def maybe_poll(still: Any, total: Any, limit: Any) -> Any:
        def ask() -> Any:
            return jax.pure_callback(
                functools.partial(_poll, file, line),
                (
                    jax.ShapeDtypeStruct(jnp.shape(still), jnp.int32),
                    jax.ShapeDtypeStruct(jnp.shape(still), jnp.bool_),
                ),
                still,
                total,
            )

        def skip() -> Any:
            return limit, jnp.zeros_like(still)

        return lax.cond(jnp.any(still), ask, skip)

    @maybe_poll.def_vmap
    def batched(axis_size: int, in_batched: Any, still: Any, total: Any, limit: Any) -> Any:
        args = [
            x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x)))
            for x, b in zip((still, total, limit), in_batched, strict=True)
        ]
        return _maybe_poll(file, line, batch_ndim + 1)(*args), (True, True)

    return maybe_poll


def bounded_while_loop(
    cond_fun: Callable[[Any], Any],
    body_fun: Callable[[Any], Any],
    init: Any,
    site: tuple[str, int] = ("", 0),
) -> Any:
    """`lax.while_loop(cond_fun, body_fun, init)`, stopped by the budget.

    Runs the same iterations as the plain loop unless the budget stops it; then it
    returns the carry as it was (the run is then reported as stopped, not used).

    Args:
        cond_fun: The loop's condition.
        body_fun: Its body.
        init: The initial carry (any pytree).
        site: (file, line) of the loop in the user's source, for the report.
    """
    file, line = site

    def outer_cond(state: tuple[Any, ...]) -> Any:
        _, _, _, running, stopped = state
        return running & ~stopped

    def outer_body(state: tuple[Any, ...]) -> tuple[Any, ...]:
        carry, total, limit, _, _ = state

        def inner_cond(inner: tuple[Any, Any]) -> Any:
            return cond_fun(inner[0]) & (inner[1] < limit)

        def inner_body(inner: tuple[Any, Any]) -> tuple[Any, Any]:
            return body_fun(inner[0]), inner[1] + 1

        carry, count = lax.while_loop(inner_cond, inner_body, (carry, jnp.int32(0)))
        total = total + count
        still = count >= limit  # it ran its whole chunk: it may not be done
        limit, stopped = _maybe_poll(file, int(line), 0)(still, total, limit)
        return carry, total, limit, still, stopped

    start = (init, jnp.int32(0), jnp.int32(FIRST_CHUNK), jnp.bool_(True), jnp.bool_(False))
    return lax.while_loop(outer_cond, outer_body, start)[0]
