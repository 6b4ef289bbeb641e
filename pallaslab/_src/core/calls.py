"""A call compiled ahead of time with its arguments on the device, for timing.

The bench layer times what `prepare` returns and never touches a traced program:
`PreparedCall.run()` runs the compiled call, and the fields say how long compiling
took and how its kernels run (emulated or interpreted on CPU, compiled elsewhere).
Kernel times on the device (CUPTI, where JAX's Mosaic GPU extension offers it) come
from `kernel_times`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import compile_cache, emulator, jax_adapter, running


@dataclasses.dataclass(frozen=True)
class PreparedCall:
    """A call compiled ahead of time, with its arguments on the device.

    Attributes:
        run: Runs the compiled call once on the placed arguments; returns its outputs
            (not waited for).
        compile_ms: Tracing, lowering and compiling, milliseconds.
        mode: How Pallas kernels run ("emulated", "interpret" or "compiled"), or
            "xla" for a program without Pallas kernels.
        backend: "cpu", "gpu" or "tpu".
        device: The device's name.
    """

    run: Callable[[], Any]
    compile_ms: float
    mode: str
    backend: str
    device: str


def prepare(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]) -> PreparedCall:
    """Places the arguments on the device and compiles the call ahead of time.

    Array leaves of `args`/`kwargs` are the program's inputs; other leaves (block
    sizes, callables) are fixed into it. `ShapeDtypeStruct`s are not allowed here:
    materialize them first (`core.seeded.materialize`).
    """
    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    dynamic = [isinstance(leaf, jax.Array | np.ndarray | np.generic) for leaf in leaves]
    if any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves):
        raise TypeError("time concrete arrays, not ShapeDtypeStructs")
    device_leaves = jax.block_until_ready(
        [jax.device_put(leaf) for leaf, d in zip(leaves, dynamic, strict=True) if d]
    )
    static = [leaf for leaf, d in zip(leaves, dynamic, strict=True) if not d]

    def flat_fn(*traced: Any) -> Any:
        traced_iter, static_iter = iter(traced), iter(static)
        rebuilt = [next(traced_iter) if d else next(static_iter) for d in dynamic]
        call_args, call_kwargs = jax.tree_util.tree_unflatten(treedef, rebuilt)
        return fn(*call_args, **call_kwargs)

    backend = jax.default_backend()
    jax_adapter.forget_kernel_traces()  # kernels reused on another grid trace afresh
    started = time.perf_counter()
    # Timed runs take the path a normal run takes (emulated on CPU).
    with running.kernel_scope():
        traced = jax.jit(flat_fn).trace(*device_leaves)
        sites = jax_adapter.find_kernel_sites(traced.jaxpr)
        # An identical program compiled before (a re-run cell, a config tried
        # again) comes from pallaslab's compile cache.
        compiled = compile_cache.compile_traced(traced, device_leaves)
    compile_ms = (time.perf_counter() - started) * 1e3
    plans = [emulator.plan_for_site(site) for site in sites] if backend == "cpu" else []
    mode = running.run_mode(backend, False, bool(sites), plans) if sites else "xla"
    return PreparedCall(
        run=lambda: compiled(*device_leaves),
        compile_ms=compile_ms,
        mode=mode,
        backend=backend,
        device=device_name(),
    )


def device_name() -> str:
    """The first device's kind, as JAX names it ("cpu", "NVIDIA H100 80GB HBM3")."""
    device = jax.devices()[0]
    return str(getattr(device, "device_kind", device.platform))


def kernel_timer_notice() -> str | None:
    """Why kernels cannot be timed on the device here (None when they can)."""
    return jax_adapter.kernel_timer_notice()


@contextlib.contextmanager
def kernel_times() -> Iterator[list[tuple[str, float]]]:
    """Records the device time of every kernel run inside: (name, milliseconds) each."""
    with jax_adapter.kernel_times() as times:
        yield times
