"""The one place pallaslab reads JAX internals (`jax._src`).

Everything read here is converted at once into pallaslab's own records
(`pallaslab._src.records`), so no other module depends on the shape of a private
JAX object. Features are probed, not versions checked: when an internal moves, the
feature that needs it degrades with a clear notice (see `FEATURES`), and
`tests/test_jax_adapter.py` pins every private shape read here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from pallaslab._src import indexmap as ix
from pallaslab._src.records import CostEstimate, Kernel, Operand, SourceLocation

# Private modules, imported defensively: each missing one disables one feature.
try:
    from jax._src import core as jax_core
    from jax._src import source_info_util
except ImportError as err:  # pragma: no cover - jax without these cannot trace Pallas
    raise ImportError(f"pallaslab needs jax._src.core ({err})") from err

try:
    from jax._src.pallas import pallas_call as _pallas_call_mod
except ImportError:  # pragma: no cover
    _pallas_call_mod = None  # type: ignore[assignment]

try:
    from jax._src.interpreters import mlir as _mlir
except ImportError:  # pragma: no cover
    _mlir = None  # type: ignore[assignment]

# pallaslab's own frames are not the user's: keep them out of source locations.
PACKAGE_DIR = str(Path(__file__).resolve().parents[2]) + "/"
if hasattr(source_info_util, "register_exclusion"):
    source_info_util.register_exclusion(PACKAGE_DIR)

# Primitive names (probed by name so a renamed module does not break discovery).
PALLAS_CALL = "pallas_call"
# `plgpu.kernel` binds `mpmd_map` in jax 0.10; `pl.core_map` binds `core_map`.
MESH_KERNELS = frozenset({"mpmd_map", "core_map"})


def _feature(name: str, available: bool, why: str) -> tuple[str, bool, str]:
    return name, available, why


FEATURES: dict[str, tuple[bool, str]] = {
    name: (ok, why)
    for name, ok, why in (
        _feature(
            "cpu-interpret",
            _pallas_call_mod is not None
            and _mlir is not None
            and hasattr(_pallas_call_mod, "_pallas_call_lowering"),
            "jax._src.pallas.pallas_call._pallas_call_lowering not found",
        ),
        _feature(
            "record-kernels",
            _pallas_call_mod is not None and hasattr(_pallas_call_mod, "pallas_call_p"),
            "jax._src.pallas.pallas_call.pallas_call_p not found",
        ),
    )
}


def feature_notice(name: str) -> str | None:
    """A one-line notice when an adapter feature is unavailable, else None."""
    ok, why = FEATURES.get(name, (False, "unknown feature"))
    if ok:
        return None
    return f"{name} is unavailable with jax {jax.__version__}: {why}"


# ---------------------------------------------------------------------------
# Finding kernels in a program.


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
    _walk(closed_jaxpr.jaxpr, (), (), sites)
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
            Operand(
                position=k,
                role="in",
                name=prefetch_names[k] if k < len(prefetch_names) else "",
                origin=f"scalar_prefetch[{k}]",
                shape=tuple(aval.shape),
                dtype=str(aval.dtype),
                block_shape=tuple(aval.shape),
                block_kinds=("full",) * len(aval.shape),
                index_map=None,
                memory_space=_memory_space_name(aval),
                scalar_prefetch=True,
            )
        )
    num_inputs = int(grid_mapping.num_inputs)
    for k, mapping in enumerate(grid_mapping.block_mappings):
        position = num_prefetch + k
        kinds, sizes = zip(*(_block_dim(d) for d in mapping.block_shape), strict=True)
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
                index_map=index_map_from_jaxpr(mapping.index_map_jaxpr, num_grid, prefetch_names),
                memory_space=_memory_space_name(mapping.transformed_block_aval),
                buffer_count=_buffer_count(mapping.pipeline_mode),
            )
        )
    first_scratch = num_prefetch + len(grid_mapping.block_mappings)
    for k, aval in enumerate(grid_mapping.scratch_avals):
        position = first_scratch + k
        shape = tuple(getattr(aval, "shape", ()))
        operands.append(
            Operand(
                position=position,
                role="scratch",
                name=arg_names[position] if position < len(arg_names) else "",
                origin=f"scratch[{k}]",
                shape=shape,
                dtype=_dtype_name(aval),
                block_shape=shape,
                block_kinds=("full",) * len(shape),
                index_map=None,
                memory_space=_memory_space_name(aval),
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
        grid_names=_names(grid_mapping.grid_names),
        operands=tuple(operands),
        jaxpr=text,
        jaxpr_source_map=source_map,
        source=_function_location(debug),
        call_site=_user_location(site.source_info),
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
    )


def _mesh_kernel_record(site: KernelSite, index: int) -> Kernel:
    """A `plgpu.kernel` / `pl.core_map` kernel: whole-array refs over a mesh."""
    params = site.params
    body = params["jaxprs"][0] if "jaxprs" in params else params["jaxpr"]
    mesh = params["meshes"][0] if "meshes" in params else params["mesh"]
    grid = tuple(int(d) for d in getattr(mesh, "grid", tuple(mesh.shape.values())))
    names = getattr(mesh, "grid_names", None) or tuple(mesh.shape)
    debug = body.debug_info
    num_inputs = len(site.in_avals)
    arg_names = _arg_names(debug, len(body.invars))
    operands = []
    for position, var in enumerate(body.invars):
        aval = var.aval
        shape = tuple(getattr(aval, "shape", ()))
        operands.append(
            Operand(
                position=position,
                role="in" if position < num_inputs else "out",
                name=arg_names[position] if position < len(arg_names) else "",
                origin=(
                    f"args[{position}]"
                    if position < num_inputs
                    else f"outputs[{position - num_inputs}]"
                ),
                shape=shape,
                dtype=_dtype_name(aval),
                block_shape=shape,
                block_kinds=("full",) * len(shape),
                index_map=None,
                memory_space=_memory_space_name(aval),
            )
        )
    for k, aval in enumerate(_scoped_allocations(body)):
        shape = tuple(getattr(aval, "shape", ()))
        operands.append(
            Operand(
                position=len(operands),
                role="scratch",
                name="",
                origin=f"scratch[{k}]",
                shape=shape,
                dtype=_dtype_name(aval),
                block_shape=shape,
                block_kinds=("full",) * len(shape),
                index_map=None,
                memory_space=_memory_space_name(aval),
            )
        )
    text, source_map = jaxpr_text(body)
    compiler_params = params.get("compiler_params")
    name = params.get("name") or (debug.func_name if debug else "kernel")
    return Kernel(
        index=index,
        name=str(name),
        kind="plgpu.kernel",
        grid=grid,
        grid_names=_names(names),
        operands=tuple(operands),
        jaxpr=text,
        jaxpr_source_map=source_map,
        source=_function_location(debug) or _first_body_location(body),
        call_site=_user_location(site.source_info),
        backend=_backend_of(compiler_params) or "mosaic_gpu",
        compiler_params=_params_fields(compiler_params),
        path=site.path,
    )


def _scoped_allocations(jaxpr: Any) -> list[Any]:
    """Buffers a mesh kernel allocates with `run_scoped` (its scratch)."""
    found: list[Any] = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "run_scoped":
            inner = eqn.params["jaxpr"]
            found.extend(v.aval for v in inner.invars)
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


def _names(names: Any) -> tuple[str, ...] | None:
    return tuple(str(n) for n in names) if names else None


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
    if debug is None or debug.func_filename is None or debug.func_lineno is None:
        return None
    return SourceLocation(str(debug.func_filename), int(debug.func_lineno), debug.func_name)


def _first_body_location(jaxpr: Any) -> SourceLocation | None:
    for eqn in jaxpr.eqns:
        location = _user_location(eqn.source_info)
        if location is not None:
            return location
    return None


def _user_location(source_info: Any) -> SourceLocation | None:
    frame = source_info_util.user_frame(getattr(source_info, "traceback", None))
    if frame is None:
        return None
    return SourceLocation(frame.file_name, int(frame.start_line), frame.function_name)


# ---------------------------------------------------------------------------
# Index maps.


def index_map_from_jaxpr(
    closed: Any, num_grid: int, prefetch_names: Sequence[str] = ()
) -> ix.IndexMap:
    """Translates an index map's jaxpr into a NumPy-evaluable `IndexMap`."""
    debug = closed.jaxpr.debug_info
    jaxpr = closed.jaxpr
    names = list(getattr(debug, "arg_names", None) or ())
    if len(names) != len(jaxpr.invars):
        names = [*_grid_letters(num_grid), *prefetch_names]
        names += [f"s{k}" for k in range(len(names), len(jaxpr.invars))]
    names = [n or f"a{k}" for k, n in enumerate(names)]
    file = str(getattr(debug, "func_filename", "") or "")
    line = int(getattr(debug, "func_lineno", 0) or 0)
    env: dict[Any, ix.Expr] = {v: ix.arg(k, names[k]) for k, v in enumerate(jaxpr.invars)}
    try:
        for var, value in zip(jaxpr.constvars, closed.consts, strict=True):
            env[var] = ix.const(int(np.asarray(value)))
        outputs = tuple(_translate(jaxpr, env))
    except _UntranslatableError:
        return ix.IndexMap(tuple(names), num_grid, None, str(jaxpr), file, line)
    return ix.IndexMap(
        tuple(names), num_grid, outputs, ix.render_lambda(names, outputs), file, line
    )


class _UntranslatableError(Exception):
    pass


# Nested jits JAX emits for Python operators, rendered back as those operators.
_NAMED_JITS = {"floor_divide": "floordiv", "remainder": "mod"}


def _translate(jaxpr: Any, env: dict[Any, ix.Expr]) -> list[ix.Expr]:
    def read(atom: Any) -> ix.Expr:
        if isinstance(atom, jax_core.Literal):
            value = np.asarray(atom.val)
            if value.shape != () or value.dtype.kind not in "iub":
                raise _UntranslatableError
            return ix.const(int(value))
        return env[atom]

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        args = [read(a) for a in eqn.invars]
        if name in ("pjit", "jit", "closed_call", "core_call"):
            short = _NAMED_JITS.get(str(eqn.params.get("name", "")))
            if short and len(args) == 2:
                results = [ix.apply(short, *args)]
            else:
                sub = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
                sub_jaxpr = getattr(sub, "jaxpr", sub)
                inner = dict(zip(sub_jaxpr.invars, args, strict=True))
                for var, value in zip(sub_jaxpr.constvars, getattr(sub, "consts", []), strict=True):
                    inner[var] = ix.const(int(np.asarray(value)))
                results = _translate(sub_jaxpr, inner)
        elif name == "convert_element_type":
            results = [args[0]]
        elif name == "get":
            results = [_translate_load(eqn, args)]
        elif name == "integer_pow" and eqn.params.get("y") == 2:
            results = [ix.apply("mul", args[0], args[0])]
        elif name in ix.SUPPORTED_OPS:
            try:
                results = [ix.apply(name, *args)]
            except (TypeError, ValueError) as err:
                raise _UntranslatableError from err
        else:
            raise _UntranslatableError
        env.update(zip(eqn.outvars, results, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _translate_load(eqn: Any, args: list[ix.Expr]) -> ix.Expr:
    """`idx_ref[i]` on a scalar-prefetch ref: scalar reads with one index per dim."""
    ref, *indices = args
    ref_aval = eqn.invars[0].aval
    if ref.op != "arg" or eqn.outvars[0].aval.shape != () or len(indices) != len(ref_aval.shape):
        raise _UntranslatableError
    return ix.load(ref.value, ref.name, indices)


def _grid_letters(count: int) -> list[str]:
    letters = "ijklmn"
    return [letters[k] if k < len(letters) else f"g{k}" for k in range(count)]


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
        source_map.append((len(lines), match["file"], int(match["line"])))
    return "\n".join(lines), tuple(source_map)


# ---------------------------------------------------------------------------
# Running kernels on CPU: interpret mode without asking for it.

_auto_interpret = threading.local()
_cpu_rule_installed = False


def install_cpu_interpret() -> str | None:
    """Lets `pallas_call` run on CPU by lowering it in interpret mode.

    JAX refuses to lower a `pallas_call` for CPU unless `interpret=True` was passed;
    pallaslab lowers such calls through JAX's own interpreter instead, while
    `auto_interpret` is on. Returns a notice when this JAX cannot do that.
    """
    global _cpu_rule_installed  # noqa: PLW0603
    notice = feature_notice("cpu-interpret")
    if notice or _cpu_rule_installed:
        return notice
    assert _pallas_call_mod is not None
    assert _mlir is not None
    jax_rule = _pallas_call_mod._pallas_call_lowering

    def cpu_rule(ctx: Any, *in_nodes: Any, interpret: Any, **params: Any) -> Any:
        if not interpret and getattr(_auto_interpret, "on", True):
            interpret = True
        return jax_rule(ctx, *in_nodes, interpret=interpret, **params)

    _mlir.register_lowering(_pallas_call_mod.pallas_call_p, cpu_rule, platform="cpu")
    _cpu_rule_installed = True
    return None


@contextlib.contextmanager
def auto_interpret(on: bool = True) -> Iterator[None]:
    """Within the block, kernels lowered for CPU run in interpret mode when `on`."""
    previous = getattr(_auto_interpret, "on", True)
    _auto_interpret.on = on
    try:
        yield
    finally:
        _auto_interpret.on = previous


# ---------------------------------------------------------------------------
# Recording the kernels a block of code binds.


@contextlib.contextmanager
def recording_kernels() -> Iterator[list[KernelSite]]:
    """Records every `pallas_call` bound while the block runs.

    Kernels inside a function that JAX already compiled are not traced again, so
    they are not seen here; callers say so when nothing was recorded.
    """
    sites: list[KernelSite] = []
    if feature_notice("record-kernels"):
        yield sites
        return
    assert _pallas_call_mod is not None
    primitive = _pallas_call_mod.pallas_call_p
    shadowed = primitive.__dict__.get("bind")
    inner_bind = shadowed or types.MethodType(type(primitive).bind, primitive)

    def recording_bind(*args: Any, **params: Any) -> Any:
        sites.append(
            KernelSite(
                primitive=PALLAS_CALL,
                params=dict(params),
                in_avals=tuple(_aval_of(a) for a in args),
                source_info=source_info_util.current(),
                path=(),
            )
        )
        return inner_bind(*args, **params)

    primitive.bind = recording_bind  # type: ignore[method-assign]
    try:
        yield sites
    finally:
        if shadowed is None:
            del primitive.bind
        else:
            primitive.bind = shadowed  # type: ignore[method-assign]


@contextlib.contextmanager
def forced_interpret(on: bool) -> Iterator[None]:
    """Within the block (when `on`), every `pallas_call` traced runs in interpret mode.

    Uses JAX's own interpret-mode switch, which is part of the jit cache key, so
    functions compiled before are traced again under it.
    """
    config = getattr(getattr(jax, "_src", None), "config", None)
    switch = getattr(config, "pallas_tpu_interpret_mode_context_manager", None)
    if not on or switch is None:
        yield
        return
    previous = switch.swap_local(True)
    try:
        yield
    finally:
        switch.set_local(previous)


def prefetch_values(site: KernelSite, program: Any, leaves: Sequence[Any]) -> tuple[Any, ...]:
    """The scalar-prefetch values a kernel receives when the program runs on `leaves`.

    Evaluates the program's equations up to the kernel, one by one (descending into
    `jit`s on the way). Returns () when the kernel has no scalar prefetch, and also
    when it sits where that cannot be done (inside a loop or a branch).
    """
    mapping = site.params.get("grid_mapping")
    count = int(getattr(mapping, "num_index_operands", 0) or 0)
    if count == 0 or site.eqn is None or program.closed_jaxpr is None:
        return ()
    if any(e.primitive.name not in ("jit", "pjit", "closed_call") for e in site.trail):
        return ()
    closed = program.closed_jaxpr
    env = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))
    env.update(zip(closed.jaxpr.invars, leaves, strict=True))
    try:
        values = _evaluate_until(closed.jaxpr, env, [*site.trail, site.eqn])
    except Exception:
        return ()
    return tuple(np.asarray(v) for v in values[site_prefetch_offset(site) :][:count])


def site_prefetch_offset(site: KernelSite) -> int:
    """Position of the first scalar-prefetch operand among the kernel's inputs."""
    # Dynamic grid bounds come first, then the scalar-prefetch operands.
    grid = site.params["grid_mapping"].grid
    return sum(1 for d in grid if not isinstance(d, (int, np.integer)))


def _evaluate_until(jaxpr: Any, env: dict[Any, Any], trail: list[Any]) -> list[Any]:
    """Evaluates `jaxpr` until `trail[0]`; returns the input values of `trail[-1]`."""
    target = trail[0]

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jax_core.Literal) else env[atom]

    for eqn in jaxpr.eqns:
        values = [read(v) for v in eqn.invars]
        if eqn is target:
            if len(trail) == 1:
                return values
            sub = eqn.params["jaxpr"]
            inner = dict(zip(sub.jaxpr.constvars, sub.consts, strict=True))
            inner.update(zip(sub.jaxpr.invars, values, strict=True))
            return _evaluate_until(sub.jaxpr, inner, trail[1:])
        outputs = eqn.primitive.bind(*values, **eqn.params)
        if not eqn.primitive.multiple_results:
            outputs = [outputs]
        env.update(zip(eqn.outvars, outputs, strict=True))
    raise LookupError("kernel not found in its program")


def _aval_of(value: Any) -> Any:
    typeof = getattr(jax_core, "typeof", None) or getattr(jax_core, "get_aval")  # noqa: B009
    return typeof(value)


def same_kernel(a: KernelSite, b: KernelSite) -> bool:
    """Whether two sites bind the same kernel body on the same operand types."""
    return a.params.get("jaxpr") is b.params.get("jaxpr") and a.in_avals == b.in_avals


def site_function(site: KernelSite) -> Callable[..., Any]:
    """A function that runs just this kernel, for lowering or running it alone."""
    assert _pallas_call_mod is not None
    primitive = _pallas_call_mod.pallas_call_p if site.primitive == PALLAS_CALL else None
    if primitive is None:
        raise NotImplementedError(f"running a {site.primitive} kernel alone")
    params = site.params

    def run_kernel(*args: Any) -> Any:
        return primitive.bind(*args, **params)

    return run_kernel


# ---------------------------------------------------------------------------
# Context for error messages.


@dataclasses.dataclass(frozen=True)
class KernelCallContext:
    """What JAX knew about a kernel whose tracing failed."""

    kernel_name: str
    kernel_location: SourceLocation | None
    num_inputs: int
    num_outputs: int
    num_scratch: int
    num_prefetch: int


def kernel_call_context(traceback: types.TracebackType | None) -> KernelCallContext | None:
    """Finds the `pallas_call` being traced when an exception was raised.

    Reads the locals of JAX's `pallas_call` wrapper frame in the traceback (the
    grid mapping and the kernel function), which is the only place they exist when
    tracing the kernel body fails.
    """
    mapping = kernel = scratch_tree = None
    tb = traceback
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename.endswith("pallas_call.py") and "grid_mapping" in frame.f_locals:
            local = frame.f_locals
            mapping = local["grid_mapping"]
            kernel = local.get("kernel", kernel)
            scratch_tree = local.get("scratch_tree", scratch_tree)
        tb = tb.tb_next
    if mapping is None:
        return None
    function = getattr(kernel, "func", kernel)  # functools.partial
    code = getattr(function, "__code__", None)
    return KernelCallContext(
        kernel_name=getattr(function, "__name__", "kernel"),
        kernel_location=(
            SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)
            if code is not None
            else None
        ),
        num_inputs=int(mapping.num_inputs),
        num_outputs=int(mapping.num_outputs),
        num_scratch=int(getattr(scratch_tree, "num_leaves", len(mapping.scratch_avals))),
        num_prefetch=int(mapping.num_index_operands),
    )


def block_spec_location(traceback: types.TracebackType | None) -> SourceLocation | None:
    """Where the BlockSpec being converted when an exception was raised was written.

    JAX converts each BlockSpec in a frame whose `block_spec` local holds it; the
    index map function's code gives the line (usually the BlockSpec's own line).
    """
    found = None
    tb = traceback
    while tb is not None:
        spec = tb.tb_frame.f_locals.get("block_spec")
        index_map = getattr(spec, "index_map", None)
        # JAX wraps index maps (`_IndexMapFunc`), sometimes twice; unwrap to the
        # user's function.
        for _ in range(8):
            if hasattr(index_map, "__code__"):
                break
            index_map = getattr(index_map, "__wrapped__", None)
        code = getattr(index_map, "__code__", None)
        if code is not None:
            found = SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)
        tb = tb.tb_next
    return found
