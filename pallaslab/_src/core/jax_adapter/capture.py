"""How each Pallas kernel of a program was written: its function and its grid spec.

A traced program holds a kernel as a jaxpr. A reproducer needs what the user wrote
instead: the kernel function (to write its source), the BlockSpecs with their
index-map functions, the scratch shapes, the pytree structure of the call. As
`pallas_call` traces a kernel it hands those to two internal functions
(`pallas.core.get_grid_mapping`, then `pallas_call._trace_kernel_to_jaxpr`), which
`trace_constructions` watches while it traces the program.

JAX caches traces (a `pallas_call` traced once is not traced again), so the program
is traced under a trace-context value of its own, which no cache holds yet.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core.jax_adapter.emulation import emulation_scope
from pallaslab._src.core.jax_adapter.kernels import KernelSite, find_kernel_sites
from pallaslab._src.core.jax_adapter.probes import pallas_call_module

try:
    from jax._src.pallas import core as pallas_core
except ImportError:  # pragma: no cover - then nothing is captured
    pallas_core = None  # type: ignore[assignment]

UNAVAILABLE = (
    ""
    if pallas_core is not None
    and hasattr(pallas_core, "get_grid_mapping")
    and pallas_call_module is not None
    and hasattr(pallas_call_module, "_trace_kernel_to_jaxpr")
    else "jax._src.pallas: get_grid_mapping / _trace_kernel_to_jaxpr not found"
)


@dataclasses.dataclass(frozen=True)
class Construction:
    """One `pallas_call` as its author wrote it (JAX objects inside; core only).

    Attributes:
        kernel: The kernel function given to `pallas_call` (maybe a partial).
        grid_spec: The grid spec: `grid`, `in_specs` / `out_specs` (BlockSpecs with
            their index-map functions), `scratch_shapes`, and for TPU
            `num_scalar_prefetch`.
        jaxpr: The kernel body it traced to (the `jaxpr` parameter of its binding).
        grid_mapping: The grid mapping it made (the `grid_mapping` parameter).
        in_tree: The pytree structure of the call's arguments.
        out_tree: The pytree structure of its `out_shape`.
        kernel_in_tree: How the kernel function is called (positional refs, and
            scratch refs as keywords when given as a dict).
    """

    kernel: Callable[..., Any]
    grid_spec: Any
    jaxpr: Any
    grid_mapping: Any
    in_tree: Any
    out_tree: Any
    kernel_in_tree: Any


_lock = threading.Lock()


class _CaptureToken:
    """A trace-context value no cache has seen: every pallas_call is traced again."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "pallaslab-capture"


@contextlib.contextmanager
def _watching(found: list[Construction]) -> Iterator[None]:
    assert pallas_core is not None
    assert pallas_call_module is not None
    real_mapping = pallas_core.get_grid_mapping
    real_trace = pallas_call_module._trace_kernel_to_jaxpr
    mapping_signature = inspect.signature(real_mapping)
    trace_signature = inspect.signature(real_trace)
    specs: dict[int, tuple[Any, Any, Any, Any]] = {}

    def get_grid_mapping(*args: Any, **kwargs: Any) -> Any:
        result = real_mapping(*args, **kwargs)
        bound = mapping_signature.bind(*args, **kwargs).arguments
        grid_mapping = result[1]
        specs[id(grid_mapping)] = (
            grid_mapping,
            bound.get("grid_spec"),
            bound.get("in_tree"),
            bound.get("out_tree"),
        )
        return result

    def trace_kernel(*args: Any, **kwargs: Any) -> Any:
        result = real_trace(*args, **kwargs)
        bound = trace_signature.bind(*args, **kwargs).arguments
        entry = specs.get(id(bound.get("grid_mapping")))
        if entry is not None and entry[0] is bound.get("grid_mapping"):
            found.append(
                Construction(
                    kernel=bound["fun"],
                    grid_spec=entry[1],
                    jaxpr=result[0],
                    grid_mapping=entry[0],
                    in_tree=entry[2],
                    out_tree=entry[3],
                    kernel_in_tree=bound.get("kernel_in_tree"),
                )
            )
        return result

    with _lock:
        pallas_core.get_grid_mapping = get_grid_mapping
        pallas_call_module._trace_kernel_to_jaxpr = trace_kernel
        try:
            yield
        finally:
            pallas_core.get_grid_mapping = real_mapping
            pallas_call_module._trace_kernel_to_jaxpr = real_trace


def trace_constructions(
    fn: Callable[..., Any], args: Sequence[Any]
) -> tuple[list[KernelSite], list[Construction]]:
    """Traces `fn(*args)` afresh; returns its kernel sites and how each was written.

    Raises:
        RuntimeError: When this JAX lacks what is watched.
    """
    if UNAVAILABLE:
        raise RuntimeError(f"this JAX cannot show how its kernels were written ({UNAVAILABLE})")
    found: list[Construction] = []
    abstract = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in args]
    with _watching(found), emulation_scope(_CaptureToken()):
        closed = jax.make_jaxpr(fn)(*abstract)
    return find_kernel_sites(closed), found


def construction_of(site: KernelSite, constructions: Sequence[Construction]) -> Construction | None:
    """How the kernel bound at `site` was written (None if it was transformed since).

    A kernel under `jax.vmap` or differentiation is bound with a body JAX rewrote;
    only the kernel as written matches its construction.
    """
    body = site.params.get("jaxpr")
    mapping = site.params.get("grid_mapping")
    for construction in constructions:
        if construction.jaxpr is body and construction.grid_mapping is mapping:
            return construction
    return None
