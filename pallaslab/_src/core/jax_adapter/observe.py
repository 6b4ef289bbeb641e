"""Watching every kernel a program lowers: what `pytest --pallaslab` checks.

A test suite runs its kernels eagerly, under `jit`, `vmap` or `grad`; every one of
them is lowered (an eager `pallas_call` is jitted on its way, JAX's `_pallas_call_impl`)
after JAX's transformations rewrote it. pallaslab's lowering rules (`execution.py`)
tell the observer registered here about each kernel they lower, as lowered: its
parameters, its operand types, the platform and whether the module is for export.
The observer answers with a function to call with the kernel's operands and results
when the program runs, or None; the rule then adds a host callback (`jax.debug.callback`)
after the kernel as JAX lowered it, so what the program computes is unchanged.

Also here: the JAX configuration a kernel was lowered under (x64, rank and dtype
promotion ...), captured so a check run later sees what the test saw.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter.kernels.locations import function_location, kernel_location
from pallaslab._src.core.jax_adapter.kernels.sites import mesh_backend, mesh_of
from pallaslab._src.core.jax_adapter.probes import mlir_module
from pallaslab._src.records import SourceLocation

try:
    from jax._src import config as jax_config
except ImportError:  # pragma: no cover - then no configuration is captured
    jax_config = None  # type: ignore[assignment]


@dataclasses.dataclass(frozen=True)
class LoweredKernel:
    """A kernel as a lowering rule met it (JAX objects inside; core only).

    Attributes:
        primitive: The primitive lowered: "pallas_call", or "mpmd_map" (`plgpu.kernel`
            in jax 0.10) lowered as a `pallas_call` on a mesh.
        params: Its parameters (for `mpmd_map`, those of the `pallas_call` it becomes
            when JAX lowers it for CPU are not known here: its own).
        in_avals: Its operands' abstract values.
        out_avals: Its results' abstract values.
        platform: The platform lowered for ("cpu", "cuda", "tpu" ...).
        for_export: Whether the module is lowered for `jax.export` (no host callbacks
            can be serialized).
        unreadable: Why the operands cannot be handed to Python when the program runs
            ("" when they can: plain arrays of NumPy-compatible dtypes).
        abstract_mesh: The abstract mesh it was lowered under, where one was set
            (`jax.sharding.use_abstract_mesh`: a TPU interpreter's chip, for its
            padded buffers); None otherwise.
    """

    primitive: str
    params: dict[str, Any] = dataclasses.field(repr=False)
    in_avals: tuple[Any, ...]
    out_avals: tuple[Any, ...]
    platform: str
    for_export: bool
    unreadable: str
    abstract_mesh: Any = None


# Given a lowered kernel, a function of its operands and results (called as the program
# runs, with NumPy arrays), or None. Registered by the core's sanitizer.
Observer = Callable[[LoweredKernel], Callable[..., None] | None]
_observer: Observer | None = None
# Per thread: whether what it lowers is hidden from the observer (the checks' own
# kernels, lowered while the suite's tests go on in another thread).
_hidden = threading.local()


def set_observer(observer: Observer | None) -> None:
    """Registers (or, with None, removes) the observer of lowered kernels."""
    global _observer  # noqa: PLW0603
    _observer = observer


def observing() -> bool:
    """Whether an observer is registered and this thread's kernels are shown to it."""
    return _observer is not None and not getattr(_hidden, "on", False)


@contextlib.contextmanager
def unobserved() -> Iterator[None]:
    """Within the block, kernels this thread lowers are not shown to the observer."""
    previous = getattr(_hidden, "on", False)
    _hidden.on = True
    try:
        yield
    finally:
        _hidden.on = previous


def after_lowering(
    ctx: Any,
    primitive: str,
    params: dict[str, Any],
    in_nodes: Sequence[Any],
    out_nodes: Sequence[Any],
    *,
    platform: str,
) -> None:
    """Tells the observer about a kernel just lowered; adds its callback, if any.

    Called by pallaslab's lowering rules with the kernel's operands and JAX's own
    lowering of it (`out_nodes`).
    """
    if not observing():
        return
    assert _observer is not None
    in_avals = tuple(ctx.avals_in)
    out_avals = tuple(ctx.avals_out or ())
    parameters = getattr(ctx.module_context, "lowering_parameters", None)
    lowered = LoweredKernel(
        primitive=primitive,
        params=params,
        in_avals=in_avals,
        out_avals=out_avals,
        platform=platform,
        for_export=bool(getattr(parameters, "for_export", False)),
        unreadable=_unreadable(in_avals + out_avals),
        abstract_mesh=_abstract_mesh(),
    )
    callback = _observer(lowered)
    if callback is None or lowered.for_export or lowered.unreadable:
        return
    _lower_callback(ctx, callback, in_avals + out_avals, [*in_nodes, *out_nodes])


def _abstract_mesh() -> Any:
    """The abstract mesh set where a kernel is lowered; None when none is set."""
    get = getattr(jax.sharding, "get_abstract_mesh", None)
    try:
        mesh = get() if callable(get) else None
    except Exception:  # a JAX that answers otherwise: none
        return None
    # A mesh of no axes can still name a device (a chip, for TPU tiling).
    if mesh is None or (getattr(mesh, "empty", True) and mesh.abstract_device is None):
        return None
    return mesh


def _unreadable(avals: Sequence[Any]) -> str:
    """Why these values cannot reach Python as NumPy arrays ("" when they can)."""
    for aval in avals:
        shape = getattr(aval, "shape", None)
        dtype = getattr(aval, "dtype", None)
        if shape is None or dtype is None:
            return f"it takes or returns a {type(aval).__name__}, not an array"
        if jnp.issubdtype(dtype, jax.dtypes.extended):
            return f"it takes or returns arrays of {dtype}, which a check cannot read back"
        if not all(isinstance(d, (int, np.integer)) for d in shape):
            return f"it takes or returns an array of symbolic shape {tuple(shape)}"
    return ""


def _lower_callback(
    ctx: Any, callback: Callable[..., None], avals: Sequence[Any], nodes: Sequence[Any]
) -> None:
    assert mlir_module is not None

    def emit(*values: Any) -> list[Any]:
        jax.debug.callback(callback, *values)
        return []

    sub = ctx.replace(avals_in=list(avals), avals_out=[], tokens_out=None)
    mlir_module.lower_fun(emit, multiple_results=True)(sub, *nodes)


# ---------------------------------------------------------------------------
# The configuration a kernel was lowered under.

# Options whose values change what a kernel computes or how pallaslab's checks trace;
# the others (meshes, profiling, the jit switch itself) are left as they are.
_LEFT_AS_THEY_ARE = frozenset({"jax_disable_jit", "jax_no_execution", "jax_default_device"})


def config_snapshot() -> tuple[tuple[str, Any], ...]:
    """The values of JAX's options in the trace context now, by name."""
    states = getattr(jax_config, "config_states", None)
    names = _trace_context_names()
    if states is None or not names:
        return ()
    return tuple(
        (name, states[name].value)
        for name in names
        if name in states and name not in _LEFT_AS_THEY_ARE
    )


def _trace_context_names() -> tuple[str, ...]:
    try:
        return tuple(jax_config.trace_context_names())
    except Exception:  # a JAX without names: nothing is captured
        return ()


@contextlib.contextmanager
def restored_config(snapshot: Sequence[tuple[str, Any]]) -> Iterator[None]:
    """Within the block, JAX's options have the values of `snapshot` (this thread)."""
    states = getattr(jax_config, "config_states", {})
    with contextlib.ExitStack() as stack:
        for name, value in snapshot:
            state = states.get(name)
            if state is None or state.value == value:
                continue
            previous = state.swap_local(value)
            stack.callback(state.set_local, previous)
        yield


# ---------------------------------------------------------------------------
# What a lowered kernel is, in plain values.


def lowered_name(lowered: LoweredKernel) -> str:
    """The kernel's name: `name=`, else its function's, else the primitive's."""
    params = lowered.params
    name = params.get("name") or getattr(params.get("name_and_src_info"), "name", None)
    if not name:
        body = params.get("jaxpr")
        if body is None and params.get("jaxprs"):
            body = params["jaxprs"][0]
        name = getattr(getattr(body, "debug_info", None), "func_name", "")
    return str(name or lowered.primitive)


def lowered_mesh(lowered: LoweredKernel) -> str:
    """The backend of the mesh a kernel runs over; "" for a kernel on a grid.

    "mosaic_gpu", "mosaic_tpu", or "other".
    """
    params = lowered.params
    if "meshes" not in params and params.get("mesh") is None:
        return ""
    return mesh_backend(mesh_of(params)) or "other"


def lowered_location(lowered: LoweredKernel) -> SourceLocation | None:
    """Where the kernel function is defined, when its body says."""
    params = lowered.params
    body = params.get("jaxpr")
    if body is None and params.get("jaxprs"):
        body = params["jaxprs"][0]
    if body is None:
        return None
    return function_location(getattr(body, "debug_info", None)) or kernel_location(body)
