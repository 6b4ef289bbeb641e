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


def vmapped_construction(
    site: KernelSite, constructions: Sequence[Construction], name: str
) -> tuple[Construction, tuple[tuple[int, ...], tuple[int, ...]]]:
    """The construction of a kernel `jax.vmap` batched, with the vmap's axes."""
    mapping = site.params["grid_mapping"]
    body_source = getattr(getattr(site.params["jaxpr"], "debug_info", None), "func_src_info", None)
    for construction in constructions:
        inner = construction.grid_mapping
        same_kernel = (
            getattr(getattr(construction.jaxpr, "debug_info", None), "func_src_info", None)
            == body_source
        )
        if not same_kernel or len(inner.block_mappings) != len(mapping.block_mappings):
            continue
        if len(tuple(mapping.vmapped_dims)) != 1 or tuple(inner.vmapped_dims):
            continue
        if int(mapping.num_index_operands):  # prefetch operands have no block mapping
            continue
        axes = [
            _inserted_axis(outer.block_shape, plain.block_shape)
            for outer, plain in zip(mapping.block_mappings, inner.block_mappings, strict=True)
        ]
        if any(a is None for a in axes):
            continue
        count = int(mapping.num_inputs)
        found = [int(a) for a in axes if a is not None]
        return construction, (tuple(found[:count]), tuple(found[count:]))
    raise ValueError(
        f"{name} is bound as JAX transformed it (differentiated, or vmapped more than "
        "once): the call as written would not reproduce it; not written"
    )


def _inserted_axis(batched: Sequence[Any], plain: Sequence[Any]) -> int | None:
    """The position of the one block dimension `batched` has and `plain` lacks."""
    if len(batched) != len(plain) + 1:
        return None
    for position in range(len(batched)):
        rest = [*batched[:position], *batched[position + 1 :]]
        if all(_same_block_dim(a, b) for a, b in zip(rest, plain, strict=True)):
            return position
    return None


def _same_block_dim(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


@dataclasses.dataclass(frozen=True)
class CallKeywords:
    """The keyword arguments of a `pallas_call` as its author wrote them (public types).

    Attributes:
        out_shape: `out_shape`: a pytree of `jax.ShapeDtypeStruct`s.
        grid: The grid, when the grid spec is a plain `GridSpec` without names.
        in_specs: Its `in_specs` (None when the call gave none).
        out_specs: Its `out_specs` (None when the call gave none).
        scratch_shapes: Its `scratch_shapes`.
        grid_spec: The grid spec itself, when it is not a plain one (TPU's
            `PrefetchScalarGridSpec`, named grids); None otherwise.
        input_output_aliases: {input index: output index}.
        compiler_params: The compiler params given, if any.
        cost_estimate: The cost estimate given, if any.
        name: `name=`, if given.
        metadata: `metadata=`, if given.
        interpret: What `interpret=` asked for.
    """

    out_shape: Any
    grid: tuple[Any, ...] = ()
    in_specs: Any = None
    out_specs: Any = None
    scratch_shapes: tuple[Any, ...] = ()
    grid_spec: Any = None
    input_output_aliases: dict[int, int] = dataclasses.field(default_factory=dict)
    compiler_params: Any = None
    cost_estimate: Any = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    interpret: Any = None


def call_keywords(site: KernelSite, construction: Construction, *, vmapped: bool) -> CallKeywords:
    """What to pass `pallas_call` to bind this kernel again (a vmapped one unbatched)."""
    from jax.experimental import pallas  # noqa: PLC0415 - only when a reproducer is written

    params = site.params
    grid_spec = construction.grid_spec
    out_avals = list(params["out_avals"])
    if vmapped:  # the call as written, before `jax.vmap` batched it
        mapping = construction.grid_mapping
        out_avals = [
            block.array_aval for block in mapping.block_mappings[int(mapping.num_inputs) :]
        ]
    shapes = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in out_avals]
    out_shape = jax.tree_util.tree_unflatten(construction.out_tree, shapes)
    name = params.get("name") or getattr(params.get("name_and_src_info"), "name", None)
    common: dict[str, Any] = {
        "out_shape": out_shape,
        "input_output_aliases": {
            int(i): int(o) for i, o in params.get("input_output_aliases") or ()
        },
        "compiler_params": params.get("compiler_params") or None,
        "cost_estimate": params.get("cost_estimate") or None,
        "name": name if isinstance(name, str) and name else None,
        "metadata": dict(params["metadata"]) if params.get("metadata") else None,
        "interpret": params.get("interpret"),
    }
    if type(grid_spec).__name__ != "GridSpec" or getattr(grid_spec, "grid_names", None):
        return CallKeywords(grid_spec=grid_spec, **common)
    unset = getattr(pallas, "no_block_spec", object())
    return CallKeywords(
        grid=tuple(grid_spec.grid),
        in_specs=None if grid_spec.in_specs is unset else grid_spec.in_specs,
        out_specs=None if grid_spec.out_specs is unset else grid_spec.out_specs,
        scratch_shapes=tuple(grid_spec.scratch_shapes or ()),
        **common,
    )
