"""Converting a kernel site into pallaslab's `Kernel` record: grid, operands, params, source.

`pallas_call` kernels have a grid and BlockSpecs; mesh kernels (`pl.kernel`,
`plgpu.kernel`, `pl.core_map`) see whole refs over a mesh. Everything JAX-shaped
(block dims, memory spaces, compiler params) becomes plain names and numbers here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.indexmaps import index_map_from_jaxpr
from pallaslab._src.core.jax_adapter.kernels.jaxprs import jaxpr_text
from pallaslab._src.core.jax_adapter.kernels.locations import (
    call_site,
    first_body_location,
    function_location,
    kernel_location,
    kernel_parameters,
)
from pallaslab._src.core.jax_adapter.kernels.sites import (
    KernelSite,
    kernel_operand_positions,
    mesh_backend,
    mesh_of,
)
from pallaslab._src.core.jax_adapter.probes import PALLAS_CALL, jax_core
from pallaslab._src.core.jax_adapter.shapes import grid_axis_names, inner_jaxpr, scoped_refs
from pallaslab._src.core.jax_adapter.work import count_work
from pallaslab._src.records import CostEstimate, Kernel, KernelWork, Operand, Role


def kernel_from_site(site: KernelSite, index: int) -> Kernel:
    """Converts a bound kernel into pallaslab's `Kernel` record."""
    if site.primitive == PALLAS_CALL:
        return _pallas_call_record(site, index)
    return _mesh_kernel_record(site, index)


def _pallas_call_record(site: KernelSite, index: int) -> Kernel:
    params = site.params
    body = params["jaxpr"]
    grid_mapping = params["grid_mapping"]
    debug = body.debug_info
    arg_names = _arg_names(debug, len(body.invars))
    grid = tuple(_grid_dim(d) for d in grid_mapping.grid)
    num_grid = len(grid)
    num_prefetch = int(grid_mapping.num_index_operands)
    prefetch_avals = tuple(grid_mapping.index_map_avals[num_grid:])
    prefetch_names = arg_names[:num_prefetch]

    operands = _whole_buffers(
        prefetch_avals,
        first=0,
        role="in",
        names=prefetch_names,
        origin="scalar_prefetch",
        scalar_prefetch=True,
    )
    num_inputs = int(grid_mapping.num_inputs)
    for k, mapping in enumerate(grid_mapping.block_mappings):
        position = num_prefetch + k
        dims = [_block_dim(d) for d in mapping.block_shape]  # none for a 0-d operand
        kinds, sizes = tuple(k for k, _ in dims), tuple(n for _, n in dims)
        padding = tuple(tuple(getattr(d, "padding", (0, 0))) for d in mapping.block_shape)
        operands.append(
            Operand(
                position=position,
                role="in" if k < num_inputs else "out",
                name=arg_names[position] if position < len(arg_names) else "",
                origin=str(mapping.origin),
                shape=tuple(mapping.array_aval.shape),
                dtype=str(mapping.array_aval.dtype),
                block_shape=tuple(sizes),
                block_kinds=tuple(kinds),
                index_map=index_map_from_jaxpr(
                    mapping.index_map_jaxpr,
                    num_grid,
                    prefetch_names,
                    getattr(mapping, "index_map_out_tree", None),
                ),
                memory_space=_memory_space_name(mapping.transformed_block_aval),
                buffer_count=_buffer_count(mapping.pipeline_mode),
                revisit=_revisit_mode(mapping.pipeline_mode),
                element_padding=(
                    tuple((int(lo), int(hi)) for lo, hi in padding)
                    if any(p != (0, 0) for p in padding)
                    else ()
                ),
            )
        )
    operands += _whole_buffers(
        grid_mapping.scratch_avals,
        first=num_prefetch + len(grid_mapping.block_mappings),
        role="scratch",
        names=arg_names,
        origin="scratch",
    )

    compiler_params = params.get("compiler_params")
    text, source_map = jaxpr_text(body)
    semantics = getattr(compiler_params, "dimension_semantics", None)
    cost = params.get("cost_estimate")
    interpret = params.get("interpret")
    return Kernel(
        index=index,
        name=params.get("name") or debug.func_name,
        kind="pallas_call",
        grid=grid,
        grid_names=grid_axis_names(grid_mapping.grid_names, num_grid, grid_mapping.vmapped_dims),
        operands=tuple(operands),
        jaxpr=text,
        jaxpr_source_map=source_map,
        source=function_location(debug) or first_body_location(inner_jaxpr(body)),
        call_site=call_site(site),
        backend=backend_of(compiler_params),
        compiler_params=_params_fields(compiler_params),
        dimension_semantics=(tuple(_semantics_name(s) for s in semantics) if semantics else None),
        cost_estimate=(
            CostEstimate(int(cost.flops), int(cost.transcendentals), int(cost.bytes_accessed))
            if cost is not None
            else None
        ),
        interpret=repr(interpret) if interpret else "",
        vmapped_dims=tuple(int(d) for d in grid_mapping.vmapped_dims),
        num_scalar_prefetch=num_prefetch,
        input_output_aliases=tuple(
            (int(i), int(o)) for i, o in params.get("input_output_aliases", ())
        ),
        path=site.path,
        work=_work(body, grid),
        unused=_unused_arguments(inner_jaxpr(body)),
    )


def _unused_arguments(jaxpr: Any) -> tuple[int, ...]:
    """Positions of the kernel's arguments no equation of its body takes or returns."""
    used = {id(v) for eqn in jaxpr.eqns for v in eqn.invars}
    used |= {id(v) for v in jaxpr.outvars}
    return tuple(k for k, v in enumerate(jaxpr.invars) if id(v) not in used)


def _work(body: Any, grid: tuple[int, ...]) -> KernelWork | None:
    try:
        return count_work(body, math.prod(max(d, 1) for d in grid))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None  # an unfamiliar primitive's params: no estimate rather than a wrong one


def _mesh_body(site: KernelSite) -> Any:
    params = site.params
    return params["jaxprs"][0] if "jaxprs" in params else params["jaxpr"]


def _mesh_kernel_record(site: KernelSite, index: int) -> Kernel:
    """A mesh kernel (`pl.kernel`, `plgpu.kernel`, `pl.core_map`): whole refs over a mesh."""
    params = site.params
    body = _mesh_body(site)
    mesh = mesh_of(params)
    grid = tuple(int(d) for d in getattr(mesh, "grid", tuple(mesh.shape.values())))
    names = getattr(mesh, "grid_names", None) or tuple(mesh.shape)
    name, kind, backend = mesh_kernel_summary(site)
    compiler_params = params.get("compiler_params")
    if site.primitive == "core_map":
        operands = _core_map_operands(body)
    else:
        operands = _mapped_operands(
            body, len(site.in_avals), len(params.get("out_avals", ())) or None
        )
    operands += _whole_buffers(
        _scoped_allocations(body), first=len(operands), role="scratch", names=(), origin="scratch"
    )
    text, source_map = jaxpr_text(body)
    return Kernel(
        index=index,
        name=name,
        kind=kind,
        grid=grid,
        grid_names=grid_axis_names(names, len(grid), ()),
        operands=tuple(operands),
        jaxpr=text,
        jaxpr_source_map=source_map,
        source=kernel_location(body),
        call_site=call_site(site),
        backend=backend or "mosaic_gpu",
        compiler_params=_params_fields(compiler_params),
        path=site.path,
        work=_work(body, grid),
    )


def mesh_kernel_summary(site: KernelSite) -> tuple[str, str, str]:
    """(name, kind, backend) of a mesh kernel, as its record names them."""
    params = site.params
    debug = _mesh_body(site).debug_info
    backend = backend_of(params.get("compiler_params")) or mesh_backend(mesh_of(params))
    name = params.get("name") or (debug.func_name if debug else "kernel")
    return str(name), mesh_kernel_kind(site.primitive, backend), backend


def site_backend(site: KernelSite) -> str:
    """The backend a kernel is for: "mosaic_gpu", "triton", "mosaic_tpu", or "".

    "" is a `pallas_call` without compiler params, which any backend takes.
    """
    if site.primitive == PALLAS_CALL:
        return backend_of(site.params.get("compiler_params"))
    return mesh_kernel_summary(site)[2]


def mesh_kernel_kind(primitive: str, backend: str) -> str:
    """How a mesh kernel is named in records: by its backend and what built it."""
    if backend == "mosaic_gpu":
        return "plgpu.kernel"
    return "pl.core_map" if primitive == "core_map" else "pl.kernel"


def kernel_parameter_names(site: KernelSite) -> tuple[str, ...]:
    """Per value a kernel is bound to: the kernel function's parameter name, or ""."""
    positions = kernel_operand_positions(site)
    if not any(p is not None for p in positions):
        return ("",) * len(positions)
    if site.primitive == PALLAS_CALL:
        body = site.params["jaxpr"]
        names = _arg_names(body.debug_info, len(body.invars))
    else:
        names = tuple(o.name for o in _mapped_operands(_mesh_body(site), len(site.in_avals), None))
    return tuple("" if p is None or p >= len(names) else names[p] for p in positions)


def _mapped_operands(body: Any, num_inputs: int, num_outputs: int | None) -> list[Operand]:
    """`pl.kernel` / `plgpu.kernel`: inputs, outputs, then scratch, as the body takes them.

    `num_outputs` None: every argument after the inputs is an output.
    """
    arg_names = _arg_names(body.debug_info, len(body.invars))
    if function_location(body.debug_info) is None:
        # JAX's wrapper (`refs[0]` ...) passes its refs on to the kernel function,
        # first to last: name them as that function's parameters.
        arg_names = kernel_parameters(body, len(body.invars)) or arg_names
    first_scratch = len(body.invars) if num_outputs is None else num_inputs + num_outputs
    operands = []
    for position, var in enumerate(body.invars):
        role: Role = (
            "in" if position < num_inputs else "out" if position < first_scratch else "scratch"
        )
        origin = {
            "in": f"args[{position}]",
            "out": f"outputs[{position - num_inputs}]",
            "scratch": f"scratch[{position - first_scratch}]",
        }[role]
        operands.append(
            _whole_buffer(
                var.aval,
                position=position,
                role=role,
                name=arg_names[position] if position < len(arg_names) else "",
                origin=origin,
            )
        )
    return operands


def _core_map_operands(body: Any) -> list[Operand]:
    """`pl.core_map`: the refs it closes over (written ones are its outputs), then scratch."""
    written = _written_constvars(body)
    operands = []
    for position, var in enumerate(body.constvars):
        role: Role = "out" if position in written else "in"
        operands.append(
            _whole_buffer(
                var.aval, position=position, role=role, name="", origin=f"refs[{position}]"
            )
        )
    scratch = [var.aval for var in body.invars]
    return operands + _whole_buffers(
        scratch, first=len(operands), role="scratch", names=(), origin="scratch"
    )


def _written_constvars(body: Any) -> set[int]:
    """Positions of the constvars a body writes, from its write effects.

    An effect names its input by variable (`input`) in a jaxpr, by position in
    older JAX (`input_index`, counting constvars first).
    """
    positions = {id(v): k for k, v in enumerate(body.constvars)}
    found = set()
    for effect in getattr(body, "effects", ()):
        if type(effect).__name__ not in ("WriteEffect", "AccumEffect"):
            continue
        target = getattr(effect, "input", getattr(effect, "input_index", None))
        if isinstance(target, int):
            if target < len(body.constvars):
                found.add(target)
        elif id(target) in positions:
            found.add(positions[id(target)])
    return found


def _whole_buffers(
    avals: Sequence[Any],
    *,
    first: int,
    role: Role,
    names: Sequence[str],
    origin: str,
    scalar_prefetch: bool = False,
) -> list[Operand]:
    """Operands the kernel sees whole, at positions from `first`, named `origin[k]`.

    Each takes its name from `names` at its position ("" past their end).
    """
    return [
        _whole_buffer(
            aval,
            position=first + k,
            role=role,
            name=names[first + k] if first + k < len(names) else "",
            origin=f"{origin}[{k}]",
            scalar_prefetch=scalar_prefetch,
        )
        for k, aval in enumerate(avals)
    ]


def _whole_buffer(
    aval: Any,
    *,
    position: int,
    role: Role,
    name: str,
    origin: str,
    scalar_prefetch: bool = False,
) -> Operand:
    """An operand the kernel sees whole (scratch, scalar prefetch, a mesh kernel's refs)."""
    shape = tuple(getattr(aval, "shape", ()))
    return Operand(
        position=position,
        role=role,
        name=name,
        origin=origin,
        shape=shape,
        dtype=_dtype_name(aval),
        block_shape=shape,
        block_kinds=("full",) * len(shape),
        index_map=None,
        memory_space=_memory_space_name(aval),
        scalar_prefetch=scalar_prefetch,
    )


def _scoped_allocations(jaxpr: Any) -> list[Any]:
    """Buffers a mesh kernel allocates with `run_scoped` (its scratch)."""
    found: list[Any] = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "run_scoped":
            found.extend(v.aval for v in scoped_refs(eqn)[1])
        for sub in jax_core.jaxprs_in_params(eqn.params):
            found.extend(_scoped_allocations(sub))
    return found


def _arg_names(debug: Any, count: int) -> tuple[str, ...]:
    names = tuple(getattr(debug, "arg_names", None) or ())
    if len(names) != count:
        return ("",) * count
    return tuple(_clean_arg_name(n) for n in names)


def _clean_arg_name(name: str | None) -> str:
    # JAX names flattened pytree arguments like "scratch_refs[0]"; keep them readable.
    # A Mosaic GPU block with transforms is a TransformedRef: its ref is "a_smem.ref".
    return (name or "").removesuffix(".ref")


def _grid_dim(dim: Any) -> int:
    return int(dim) if isinstance(dim, (int, np.integer)) else -1


def _block_dim(dim: Any) -> tuple[str, int | None]:
    kind = type(dim).__name__
    if kind == "Squeezed" or dim is None:
        return "squeezed", None
    size = getattr(dim, "block_size", dim)
    mapping = {"Blocked": "blocked", "Element": "element", "BoundedSlice": "bounded"}
    return mapping.get(kind, kind.lower()), int(size)


def _memory_space_name(aval: Any) -> str:
    space = getattr(aval, "memory_space", None)
    if space is None:
        return "default"
    text = str(space)
    return text.rsplit(".", 1)[-1].lower() if text else "default"


def _dtype_name(aval: Any) -> str:
    dtype = getattr(aval, "dtype", None)
    return str(dtype) if dtype is not None else type(aval).__name__


def _buffer_count(pipeline_mode: Any) -> int | None:
    count = getattr(pipeline_mode, "buffer_count", None)
    return int(count) if count is not None else None


def _revisit_mode(pipeline_mode: Any) -> str:
    """`pl.Buffered(..., revisit=pl.RevisitMode.ANY)` as "any" ("" when not given)."""
    revisit = getattr(pipeline_mode, "revisit", None)  # a field of newer JAX's Buffered
    return str(getattr(revisit, "value", revisit) or "")


def backend_of(compiler_params: Any) -> str:
    """The backend compiler params select ("mosaic_gpu", "triton", "mosaic_tpu"; "" for none)."""
    if compiler_params is None:
        return ""
    module = type(compiler_params).__module__
    if "mosaic_gpu" in module:
        return "mosaic_gpu"
    if "triton" in module:
        return "triton"
    if "mosaic" in module:
        return "mosaic_tpu"
    if isinstance(compiler_params, dict):  # older JAX: {"triton": {...}}
        return next(iter(compiler_params), "")
    return module.rsplit(".", 1)[-1]


def _params_fields(compiler_params: Any) -> tuple[tuple[str, str], ...]:
    if compiler_params is None:
        return ()
    if dataclasses.is_dataclass(compiler_params):
        return tuple(
            (f.name, repr(getattr(compiler_params, f.name)))
            for f in dataclasses.fields(compiler_params)
            if getattr(compiler_params, f.name) is not None
        )
    if isinstance(compiler_params, dict):
        return tuple((str(k), repr(v)) for k, v in compiler_params.items())
    return (("params", repr(compiler_params)),)


def _semantics_name(semantic: Any) -> str:
    text = str(getattr(semantic, "value", semantic))
    return text.rsplit(".", 1)[-1].lower()
