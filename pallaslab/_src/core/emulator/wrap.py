"""For scripts: `emulate(fn)`, `fn` with its kernels run by the emulator; and `scope`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from pallaslab._src.core import chips, jax_adapter, run_budget
from pallaslab._src.core.emulator.hook import install
from pallaslab._src.core.emulator.requests import EMULATE, INTERPRET, Request
from pallaslab._src.core.jax_adapter import emulation as adapter


def emulate(
    fn: Callable[..., Any],
    *,
    interpret: bool = False,
    order: str | None = None,
    seed: int = 0,
) -> Callable[..., Any]:
    """`fn` with every `pallas_call` in it run by pallaslab's emulator.

    Works on any backend (the emulator is plain JAX) and with `jax.jit`-compiled
    functions: the emulation request is part of JAX's cache key, so `fn` is traced
    again under it. Kernels the emulator does not cover (DMAs, semaphores, remote
    copies, dynamic grids) run in Pallas' interpreter, with a one-line
    `EmulationNotice` saying why. Called on values (not inside a `jax.jit`), it
    returns once the results are ready, and runs under the run budget
    (`set_run_budget`): a kernel loop that runs too long raises `RunStoppedError`.

    Args:
        fn: Any function calling Pallas kernels (jitted or not).
        interpret: Run Pallas' own interpreter instead (for comparison).
        order: "gpu" or "tpu": run every kernel's programs in a seeded order that
            backend's rules allow (concurrent programs reading the same state; TPU
            cores not reading output blocks back), to see races change the result.
            None: the grid's order, as Pallas' interpreter runs it.
        seed: Seed of that order.

    Example:
        >>> fast = pallaslab.emulate(matmul)
        >>> fast(a, b)  # same result as interpret=True, much sooner
        >>> pallaslab.emulate(matmul, order="gpu", seed=1)(a, b)  # a GPU-like order
    """
    if order not in (None, "gpu", "tpu"):
        raise ValueError(f'order must be "gpu", "tpu" or None, not {order!r}')
    if interpret:
        request = INTERPRET
    elif order:
        request = Request(order=order, seed=int(seed))
    else:
        request = EMULATE

    @functools.wraps(fn)
    def emulated(*args: Any, **kwargs: Any) -> Any:
        install()
        backend = jax.default_backend()
        if backend != "cpu":
            jax_adapter.install_platform_rule(backend)
        jax_adapter.forget_kernel_traces()  # kernels reused on another grid trace afresh
        with (
            adapter.emulation_scope(request),
            jax_adapter.auto_interpret(),
            _forced(request),
            chips.tracing_chip(),
        ):
            if _tracing(args, kwargs):  # inside a jit: the caller's run is watched
                return fn(*args, **kwargs)
            # Called on values: it runs under the run budget, and has ended on return.
            with run_budget.watched():
                return jax.block_until_ready(fn(*args, **kwargs))

    return emulated


_TRACER: Any = getattr(jax.core, "Tracer", ())


def _tracing(args: Any, kwargs: Any) -> bool:
    """Whether any argument is a tracer (the function is being traced, not run)."""
    leaves = jax.tree_util.tree_leaves((args, kwargs))
    return any(isinstance(leaf, _TRACER) for leaf in leaves)


def _forced(request: Request) -> Any:
    return jax_adapter.forced_interpret(request.mode == "interpret")


def scope(request: Request | None) -> Any:
    """A context manager: pallas_calls traced within it follow `request`."""
    return adapter.emulation_scope(request)
