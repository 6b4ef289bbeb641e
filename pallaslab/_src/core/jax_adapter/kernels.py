"""Finding Pallas kernels in a traced program and converting them to records."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np

from pallaslab._src.base import sources
from pallaslab._src.core.jax_adapter.indexmaps import index_map_from_jaxpr
from pallaslab._src.core.jax_adapter.probes import (
    CALL_PRIMITIVES,
    MESH_KERNELS,
    PALLAS_CALL,
    jax_core,
    source_info_util,
)
from pallaslab._src.core.jax_adapter.shapes import (
    call_body,
    grid_axis_names,
    inner_jaxpr,
    scoped_refs,
)
from pallaslab._src.core.jax_adapter.work import count_work
from pallaslab._src.records import CostEstimate, Kernel, KernelWork, Operand, Role, SourceLocation


@dataclasses.dataclass(frozen=True)
class KernelSite:
    """A kernel as bound in a program: what JAX knows, before conversion.

    Holds JAX objects; it stays inside the core (for lowering and running one kernel
    on its own) and is never handed to views.
    """

    primitive: str
    params: dict[str, Any]
    in_avals: tuple[Any, ...]
    source_info: Any
    path: tuple[str, ...]
    # The equation itself and the equations enclosing it (outermost first), when the
    # kernel was found in a traced program rather than recorded as it was bound.
    eqn: Any = None
    trail: tuple[Any, ...] = ()


def find_kernel_sites(closed_jaxpr: Any) -> list[KernelSite]:
    """Every Pallas kernel in a traced program, in program order, depth first."""
    sites: list[KernelSite] = []
    _walk(inner_jaxpr(closed_jaxpr), (), (), sites)
    return sites


def _walk(
    jaxpr: Any, path: tuple[str, ...], trail: tuple[Any, ...], sites: list[KernelSite]
) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == PALLAS_CALL or name in MESH_KERNELS:
            sites.append(
                KernelSite(
                    primitive=name,
                    params=dict(eqn.params),
                    in_avals=tuple(v.aval for v in eqn.invars),
                    source_info=eqn.source_info,
                    path=path,
                    eqn=eqn,
                    trail=trail,
                )
            )
            continue
        label = _path_label(name, eqn.params)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            _walk(sub, (*path, label), (*trail, eqn), sites)


def _one_to_one_body(eqn: Any) -> Any:
    """The body of a call taking the equation's inputs one to one, or None.

    `plgpu.kernel` wraps its kernel in a `custom_vmap` (its body under "call").
    """
    name = eqn.primitive.name
    if name in CALL_PRIMITIVES:
        body = call_body(eqn.params)
    elif name == "custom_vmap_call":
        body = eqn.params.get("call")
    else:
        return None
    jaxpr = inner_jaxpr(body) if body is not None else None
    return jaxpr if hasattr(jaxpr, "eqns") else None


def program_inputs_of(closed_jaxpr: Any, site: KernelSite) -> tuple[int | None, ...]:
    """Per value a kernel is bound to: the program input it is, unchanged, or None.

    Values are followed through the calls enclosing the kernel (`jit`, `closed_call`
    ...), whose bodies take their inputs one to one; not through loops or branches,
    whose bodies see slices or carries.
    """
    if site.eqn is None:
        return ()
    unknown = (None,) * len(site.eqn.invars)
    where: dict[Any, int] = {v: k for k, v in enumerate(inner_jaxpr(closed_jaxpr).invars)}
    for depth, eqn in enumerate(site.trail):
        inner = site.trail[depth + 1] if depth + 1 < len(site.trail) else site.eqn
        jaxpr = _one_to_one_body(eqn)
        if (
            jaxpr is None
            or len(jaxpr.invars) != len(eqn.invars)
            or not any(e is inner for e in jaxpr.eqns)
        ):
            return unknown
        where = {
            var: where[outer]
            for var, outer in zip(jaxpr.invars, eqn.invars, strict=True)
            if not isinstance(outer, jax_core.Literal) and outer in where
        }
    return tuple(None if isinstance(v, jax_core.Literal) else where.get(v) for v in site.eqn.invars)


def kernel_operand_positions(site: KernelSite) -> tuple[int | None, ...]:
    """Per value a kernel is bound to: the operand (kernel parameter) it becomes.

    None where unknown: `pl.core_map` (its refs are made inside), and the values JAX
    binds before a pallas_call's operands (captured refs, dynamic grid bounds).
    """
    if site.eqn is None:
        return ()
    count = len(site.eqn.invars)
    if site.primitive in MESH_KERNELS and site.primitive != "core_map":
        return tuple(range(count))  # `pl.kernel`, `plgpu.kernel`: the inputs, in order
    grid_mapping = site.params.get("grid_mapping")
    if site.primitive != PALLAS_CALL or grid_mapping is None:
        return (None,) * count
    operands = int(grid_mapping.num_index_operands) + int(grid_mapping.num_inputs)
    if count < operands:
        return (None,) * count
    # The operands come last: pallas_call binds captured refs and grid bounds first.
    return (None,) * (count - operands) + tuple(range(operands))


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


def primitives_outside_kernels(closed_jaxpr: Any) -> list[str]:
    """The primitives a program runs outside its Pallas kernels, in program order.

    Sub-programs (`jit`, `cond`, `scan` bodies ...) are entered; kernel bodies are not.
    Each primitive is named once.
    """
    found: list[str] = []

    def walk(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name == PALLAS_CALL or name in MESH_KERNELS:
                continue
            if name not in found:
                found.append(name)
            for sub in jax_core.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(inner_jaxpr(closed_jaxpr))
    return found


def _path_label(primitive: str, params: dict[str, Any]) -> str:
    inner = params.get("name")
    return f"{primitive}({inner})" if isinstance(inner, str) and inner else primitive


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

    operands: list[Operand] = []
    for k, aval in enumerate(prefetch_avals):
        operands.append(
            _whole_buffer(
                aval,
                position=k,
                role="in",
                name=prefetch_names[k] if k < len(prefetch_names) else "",
                origin=f"scalar_prefetch[{k}]",
                scalar_prefetch=True,
            )
        )
    num_inputs = int(grid_mapping.num_inputs)
    for k, mapping in enumerate(grid_mapping.block_mappings):
        position = num_prefetch + k
        kinds, sizes = zip(*(_block_dim(d) for d in mapping.block_shape), strict=True)
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
                element_padding=(
                    tuple((int(lo), int(hi)) for lo, hi in padding)
                    if any(p != (0, 0) for p in padding)
                    else ()
                ),
            )
        )
    first_scratch = num_prefetch + len(grid_mapping.block_mappings)
    for k, aval in enumerate(grid_mapping.scratch_avals):
        position = first_scratch + k
        operands.append(
            _whole_buffer(
                aval,
                position=position,
                role="scratch",
                name=arg_names[position] if position < len(arg_names) else "",
                origin=f"scratch[{k}]",
            )
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
        source=_function_location(debug) or _first_body_location(inner_jaxpr(body)),
        call_site=_call_site(site),
        backend=_backend_of(compiler_params),
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
    )


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
    debug = body.debug_info
    compiler_params = params.get("compiler_params")
    backend = _backend_of(compiler_params) or mesh_backend(mesh)
    if site.primitive == "core_map":
        operands = _core_map_operands(body)
    else:
        operands = _mapped_operands(
            body, len(site.in_avals), len(params.get("out_avals", ())) or None
        )
    for k, aval in enumerate(_scoped_allocations(body)):
        operands.append(
            _whole_buffer(
                aval, position=len(operands), role="scratch", name="", origin=f"scratch[{k}]"
            )
        )
    text, source_map = jaxpr_text(body)
    name = params.get("name") or (debug.func_name if debug else "kernel")
    return Kernel(
        index=index,
        name=str(name),
        kind=mesh_kernel_kind(site.primitive, backend),
        grid=grid,
        grid_names=grid_axis_names(names, len(grid), ()),
        operands=tuple(operands),
        jaxpr=text,
        jaxpr_source_map=source_map,
        source=_kernel_location(body),
        call_site=_call_site(site),
        backend=backend or "mosaic_gpu",
        compiler_params=_params_fields(compiler_params),
        path=site.path,
        work=_work(body, grid),
    )


def mesh_kernel_summary(site: KernelSite) -> tuple[str, str, str]:
    """(name, kind, backend) of a mesh kernel, as its record names them."""
    params = site.params
    body = params["jaxprs"][0] if "jaxprs" in params else params["jaxpr"]
    debug = body.debug_info
    backend = _backend_of(params.get("compiler_params")) or mesh_backend(mesh_of(params))
    name = params.get("name") or (debug.func_name if debug else "kernel")
    return str(name), mesh_kernel_kind(site.primitive, backend), backend


def mesh_of(params: dict[str, Any]) -> Any:
    """The mesh a mesh kernel runs on (the first, for several)."""
    return params["meshes"][0] if "meshes" in params else params["mesh"]


def mesh_backend(mesh: Any) -> str:
    """The backend a Pallas mesh belongs to: "mosaic_gpu", "mosaic_tpu" or ""."""
    module = type(mesh).__module__
    if "mosaic_gpu" in module or "triton" in module:
        return "mosaic_gpu"
    if "pallas.mosaic" in module:  # TensorCoreMesh, the SparseCore meshes
        return "mosaic_tpu"
    return ""


def mesh_kernel_kind(primitive: str, backend: str) -> str:
    """How a mesh kernel is named in records: by its backend and what built it."""
    if backend == "mosaic_gpu":
        return "plgpu.kernel"
    return "pl.core_map" if primitive == "core_map" else "pl.kernel"


def _mapped_operands(body: Any, num_inputs: int, num_outputs: int | None) -> list[Operand]:
    """`pl.kernel` / `plgpu.kernel`: inputs, outputs, then scratch, as the body takes them.

    `num_outputs` None: every argument after the inputs is an output.
    """
    arg_names = _arg_names(body.debug_info, len(body.invars))
    if _function_location(body.debug_info) is None:
        # JAX's wrapper (`refs[0]` ...) passes its refs on to the kernel function,
        # first to last: name them as that function's parameters.
        arg_names = _kernel_parameters(body, len(body.invars)) or arg_names
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
    for k, var in enumerate(body.invars):
        operands.append(
            _whole_buffer(
                var.aval, position=len(operands), role="scratch", name="", origin=f"scratch[{k}]"
            )
        )
    return operands


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
    return name or ""


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


def _backend_of(compiler_params: Any) -> str:
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


def _function_location(debug: Any) -> SourceLocation | None:
    """Where a traced function is defined; None for JAX's or pallaslab's own wrappers."""
    if debug is None or debug.func_filename is None or debug.func_lineno is None:
        return None
    if sources.is_internal_file(str(debug.func_filename)):
        return None
    return SourceLocation(str(debug.func_filename), int(debug.func_lineno), debug.func_name)


def _kernel_location(body: Any) -> SourceLocation | None:
    """Where a kernel's function is defined, past the wrappers JAX puts around it.

    `plgpu.kernel` and `pl.kernel` trace a wrapper of their own (in JAX's core.py)
    that calls the user's function inside: the first function of the body, depth
    first, defined outside JAX and pallaslab is the kernel; else the first line of
    the body written there.
    """
    for jaxpr in _nested_jaxprs(body):
        location = _function_location(getattr(jaxpr, "debug_info", None))
        if location is not None:
            return location
    return _first_body_location(inner_jaxpr(body))


def _kernel_parameters(body: Any, count: int) -> tuple[str, ...]:
    """The first `count` parameter names of the kernel function a wrapper calls."""
    location = _kernel_location(body)
    if location is None:
        return ()
    names = sources.parameter_names(location.file, location.line)
    return names[:count] if len(names) >= count else ()


def _nested_jaxprs(body: Any) -> list[Any]:
    found = [inner_jaxpr(body)]
    for eqn in found[0].eqns:
        for sub in jax_core.jaxprs_in_params(eqn.params):
            found.extend(_nested_jaxprs(sub))
    return found


def _first_body_location(jaxpr: Any) -> SourceLocation | None:
    for eqn in jaxpr.eqns:
        location = user_location(eqn.source_info)
        if location is not None:
            return location
    return None


def user_location(source_info: Any) -> SourceLocation | None:
    """The innermost frame of user (or kernel library) code that made an equation.

    JAX skips its own frames and pallaslab's (registered with it); frames of other
    internals (where that registration is missing) are skipped here.
    """
    frames = source_info_util.user_frames(getattr(source_info, "traceback", None))
    for frame in frames:
        if not sources.is_internal_file(frame.file_name):
            return SourceLocation(frame.file_name, int(frame.start_line), frame.function_name)
    return None


def _call_site(site: KernelSite) -> SourceLocation | None:
    """Where the kernel is called, past the wrappers that bind it.

    Its equation's user frame, else the nearest enclosing equation's
    (`plgpu.kernel` binds the kernel inside a wrapper of JAX's).
    """
    for eqn in (site.eqn, *reversed(site.trail)) if site.eqn is not None else ():
        location = user_location(eqn.source_info)
        if location is not None:
            return location
    return user_location(site.source_info)


# ---------------------------------------------------------------------------
# Jaxpr text with a source map.

_LOCATION = re.compile(r"^(?P<code>.*?)\s+# (?P<file>.+?):(?P<line>\d+):\d+(?: \(.*\))?\s*$")


def jaxpr_text(jaxpr: Any) -> tuple[str, tuple[tuple[int, str, int], ...]]:
    """Pretty-prints a (closed) jaxpr; returns its text and a source map.

    The source map has one (text line, file, source line) entry, 1-based, for each
    line of an equation JAX knows the user source of.
    """
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    try:
        # No ANSI colours (JAX turns them on in notebooks); the views colour it.
        raw = inner.pretty_print(source_info=True, name_stack=False, use_color=False)
    except TypeError:  # pragma: no cover - older signature
        return str(jaxpr), ()
    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    for raw_line in raw.splitlines():
        match = _LOCATION.match(raw_line)
        if match is None:
            if raw_line.strip().startswith("#"):
                continue  # a location-only line (e.g. an empty name stack)
            lines.append(raw_line.rstrip())
            continue
        lines.append(match["code"].rstrip())
        if not sources.is_internal_file(match["file"]):
            source_map.append((len(lines), match["file"], int(match["line"])))
    return "\n".join(lines), tuple(source_map)


def jaxpr_constants(closed: Any) -> list[Any]:
    """Every constant a (closed) jaxpr holds, its sub-jaxprs' (jit, loops ...) included.

    Closed-over arrays are not part of a jaxpr's text: what a program computes depends
    on them too.
    """
    found: list[Any] = list(getattr(closed, "consts", ()))
    seen: set[int] = set()

    def walk(jaxpr: Any) -> None:
        if id(jaxpr) in seen:
            return
        seen.add(id(jaxpr))
        for eqn in jaxpr.eqns:
            for value in eqn.params.values():
                for item in value if isinstance(value, (tuple, list)) else (value,):
                    inner = getattr(item, "jaxpr", None)
                    if inner is not None and hasattr(inner, "eqns"):
                        found.extend(getattr(item, "consts", ()))
                        walk(inner)
                    elif hasattr(item, "eqns"):
                        walk(item)

    walk(getattr(closed, "jaxpr", closed))
    return found
