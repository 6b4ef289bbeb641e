"""Reading a `pallas_call` for pallaslab's emulator.

The emulator (`core/emulator/`) needs, from JAX's internals: the kernel body as a pure
function of program ids and block values (Pallas' own state discharge, with
`program_id` / `num_programs` resolved to explicit inputs), how each operand is cut
into blocks (block sizes, squeezed and element dimensions, Element padding), the index
maps as JAX functions, the value Pallas' interpreter fills padding and uninitialized
buffers with, and a switch that is part of JAX's compile-cache key so a function
compiled once emulated and once interpreted keeps both. Everything else the emulator
does is public JAX.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.core.jax_adapter.kernels import KernelSite, kernel_from_site
from pallaslab._src.core.jax_adapter.probes import PALLAS_CALL, jax_core, source_info_util
from pallaslab._src.core.jax_adapter.shapes import (
    call_body,
    closed_parts,
    inner_jaxpr,
    scan_counts,
    with_consts,
)
from pallaslab._src.records import Kernel

try:
    from jax._src import config as jax_config
    from jax._src.pallas import core as pallas_core
    from jax._src.pallas import hlo_interpreter
    from jax._src.state import discharge as state_discharge
except ImportError:  # pragma: no cover - the emulator is then unavailable
    jax_config = None  # type: ignore[assignment]
    pallas_core = None  # type: ignore[assignment]
    hlo_interpreter = None  # type: ignore[assignment]
    state_discharge = None  # type: ignore[assignment]


def _available() -> str:
    needed = (
        (hlo_interpreter, "resolve_physical_types"),
        (pallas_core, "grid_env"),
        (pallas_core, "GridAxis"),
        (state_discharge, "discharge_state"),
        (getattr(jax_config, "config_ext", None), "Config"),
    )
    for module, name in needed:
        if module is None or not hasattr(module, name):
            return f"{getattr(module, '__name__', module)}.{name} not found"
    return ""


UNAVAILABLE = _available()

# The emulation switch. Its value is a hashable request (see `core/emulator/requests.py`), or
# None for the default. Being part of the trace context and the jit key, a function
# traced or compiled under one value is traced again under another.
EMULATION_STATE: Any = (
    jax_config.config_ext.Config(
        "pallaslab_emulation", None, include_in_jit_key=True, include_in_trace_context=True
    )
    if not UNAVAILABLE
    else None
)


def emulation_request() -> Any:
    """The emulation request in force (None when none was made)."""
    return None if EMULATION_STATE is None else EMULATION_STATE.value


@contextlib.contextmanager
def emulation_scope(request: Any) -> Iterator[None]:
    """Within the block, pallas_calls traced and lowered see `request`."""
    if EMULATION_STATE is None:
        yield
        return
    previous = EMULATION_STATE.swap_local(request)
    try:
        yield
    finally:
        EMULATION_STATE.set_local(previous)


# Pallas primitives whose behaviour spans programs or devices: the emulator leaves
# kernels using them to Pallas' own interpreter. Names grouped by what to tell users.
_UNCOVERED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("remote copies and collectives", ("device_id", "remote", "multimem", "axis_index")),
    (
        "DMAs",
        (
            "dma_start",
            "dma_wait",
            "async_copy",
            "copy_gmem",
            "copy_smem",
            "async_load",
            "async_store",
            "async_prefetch",
            "wait_smem",
            "commit_smem",
            "wait_load",
        ),
    ),
    ("semaphores", ("semaphore",)),
    ("barriers", ("barrier",)),
    (
        "Mosaic GPU warpgroup and tensor-memory operations",
        ("wgmma", "tcgen05", "tmem", "cluster", "griddepcontrol", "inline_mgpu"),
    ),
)


def interpret_kind(interpret: Any) -> str:
    """How a pallas_call asked to be interpreted.

    "" (not), "plain" (`True`), or the class name of an interpreter's params
    (`InterpretParams`, ...).
    """
    if interpret is None or interpret is False:
        return ""
    if interpret is True or isinstance(interpret, (bool, np.bool_)):
        return "plain" if interpret else ""
    return type(interpret).__name__


def call_identity(params: dict[str, Any]) -> tuple[Any, Any]:
    """What makes a pallas_call the same kernel: its body jaxpr and its grid mapping.

    The emulator caches its analysis per body (weakly) and checks the mapping is the
    one analysed (`id` of a live object).
    """
    return params["jaxpr"], params["grid_mapping"]


def requested_interpret(params: dict[str, Any]) -> Any:
    """What the call's `interpret=` asked for (None, a bool, or interpreter params)."""
    return params.get("interpret")


def call_name(params: dict[str, Any]) -> str:
    """The kernel's name: `pallas_call(name=...)`, else its function's, else "kernel"."""
    name = params.get("name") or getattr(params["jaxpr"].debug_info, "func_name", "")
    return str(name or "kernel")


@dataclasses.dataclass(frozen=True)
class BlockLayout:
    """How one input or output of a kernel is cut into blocks.

    Attributes:
        shape: The array's shape.
        dtype: Its dtype.
        block: Elements per block along each dimension (1 for squeezed ones).
        squeezed: Per dimension, whether the kernel sees it squeezed away.
        element: Per dimension, whether the index map gives an element offset
            (`pl.Element`) rather than a block index.
        padding: Per dimension, `pl.Element` (low, high) padding.
        index_map: The index map as a JAX function of (*program ids, *scalar prefetch)
            returning block indices.
    """

    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    block: tuple[int, ...]
    squeezed: tuple[bool, ...]
    element: tuple[bool, ...]
    padding: tuple[tuple[int, int], ...]
    index_map: Callable[..., tuple[Any, ...]]

    @property
    def padded_shape(self) -> tuple[int, ...]:
        """The shape Pallas' interpreter works on: padded, in whole blocks."""
        padded = []
        for dim, b, (lo, hi) in zip(self.shape, self.block, self.padding, strict=True):
            extent = dim + lo + hi
            padded.append(-(-extent // b) * b)
        return tuple(padded)

    @property
    def kernel_block_shape(self) -> tuple[int, ...]:
        """The block as the kernel sees it (squeezed dimensions removed)."""
        return tuple(b for b, s in zip(self.block, self.squeezed, strict=True) if not s)


@dataclasses.dataclass(frozen=True)
class KernelCall:
    """A `pallas_call` as the emulator runs it (JAX objects inside; core only).

    Attributes:
        record: pallaslab's record of the kernel (operands, evaluable index maps).
        grid: The grid (static).
        vmapped_dims: Grid axes added by `jax.vmap`.
        num_scalars: Scalar-prefetch operands (leading inputs).
        num_inputs: Blocked inputs.
        num_outputs: Outputs.
        layouts: One per blocked input, then one per output.
        scratch: (shape, dtype) of each scratch buffer.
        aliases: Output index -> input index (among blocked inputs) it aliases.
        unsupported: Why the emulator leaves this kernel to Pallas' interpreter ("" if
            it does not).
        params: The primitive's parameters (for building the body lazily).
    """

    record: Kernel
    grid: tuple[int, ...]
    vmapped_dims: tuple[int, ...]
    num_scalars: int
    num_inputs: int
    num_outputs: int
    layouts: tuple[BlockLayout, ...]
    scratch: tuple[tuple[tuple[int, ...], np.dtype[Any]], ...]
    aliases: dict[int, int]
    unsupported: str
    params: dict[str, Any] = dataclasses.field(repr=False, compare=False)

    @functools.cached_property
    def program(self) -> ProgramBody:
        """The kernel body as a pure function of program ids and block values."""
        return _program_body(self.params, self.grid)

    @property
    def instrumented(self) -> instrument.InstrumentedBody | None:
        """The body instrumented for checks; None when it cannot be (see the notice)."""
        return self._instrumentation[0]

    @property
    def instrumentation_notice(self) -> str:
        """Why the body could not be instrumented ("" when it could)."""
        return self._instrumentation[1]

    @functools.cached_property
    def _instrumentation(self) -> tuple[instrument.InstrumentedBody | None, str]:
        try:
            return instrument.instrumented_body(self.params, self.grid), ""
        except Exception as error:  # an unfamiliar body: its checks say so
            return (
                None,
                f"its loads and stores could not be followed ({type(error).__name__}: {error})",
            )


@dataclasses.dataclass(frozen=True)
class ProgramBody:
    """One program of a kernel, as a pure function.

    `fn(pids, scalars, blocks, scratch)` returns `(blocks, scratch)`: the final value of
    every blocked input and output block, and of every scratch buffer. `pids` is one
    int32 scalar per grid axis.

    Attributes:
        fn: The function.
        written: Per blocked operand (inputs, then outputs), whether the body can change
            its block.
        scratch_carries: Whether any block the body writes can depend on the value
            scratch buffers hold when the program starts (state carried between
            programs).
        reads_initial_block: Per blocked operand, whether what the body writes can
            depend on the block's value on entry.
    """

    fn: Callable[..., tuple[list[Any], list[Any]]]
    written: tuple[bool, ...]
    scratch_carries: bool
    reads_initial_block: tuple[bool, ...]


def kernel_call(params: dict[str, Any], in_avals: Sequence[Any]) -> KernelCall:
    """Reads a pallas_call's parameters into a `KernelCall`."""
    mapping = params["grid_mapping"]
    record = kernel_from_site(
        KernelSite(
            primitive=PALLAS_CALL,
            params=dict(params),
            in_avals=tuple(in_avals),
            source_info=None,
            path=(),
        ),
        0,
    )
    unsupported = _unsupported(params)
    grid = tuple(int(d) if isinstance(d, (int, np.integer)) else -1 for d in mapping.grid)
    layouts = []
    for block_mapping in mapping.block_mappings:
        layout = _layout(block_mapping)
        if isinstance(layout, str):
            unsupported = unsupported or layout
            continue
        layouts.append(layout)
    scratch = tuple(
        (tuple(aval.shape), np.dtype(_physical_dtype(aval.dtype)))
        for aval in (_inner_aval(a) for a in mapping.scratch_avals)
    )
    num_inputs = int(mapping.num_inputs)
    return KernelCall(
        record=record,
        grid=grid,
        vmapped_dims=tuple(int(d) for d in mapping.vmapped_dims),
        num_scalars=int(mapping.num_index_operands),
        num_inputs=num_inputs,
        num_outputs=int(mapping.num_outputs),
        layouts=tuple(layouts),
        scratch=scratch,
        aliases={
            int(o): int(i) - int(mapping.num_index_operands)
            for i, o in params.get("input_output_aliases", ())
        },
        unsupported=unsupported,
        params=dict(params),
    )


def _unsupported(params: dict[str, Any]) -> str:
    if UNAVAILABLE:
        return f"this JAX lacks what the emulator reads ({UNAVAILABLE})"
    mapping = params["grid_mapping"]
    if any(not isinstance(d, (int, np.integer)) for d in mapping.grid):
        return "its grid has bounds known only at run time"
    if params.get("mesh") is not None:
        return "it runs over a device mesh"
    kind = interpret_kind(params.get("interpret"))
    if kind not in ("", "plain"):
        return f"it asks for Pallas' {kind} interpreter"
    used = _primitive_names(params["jaxpr"])
    for concern, fragments in _UNCOVERED:
        hits = sorted(n for n in used if any(f in n for f in fragments))
        if hits:
            return f"it uses {concern} ({', '.join(hits)}), which the emulator does not cover"
    return ""


def _primitive_names(jaxpr: Any) -> set[str]:
    names: set[str] = set()
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        names.add(eqn.primitive.name)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            names |= _primitive_names(sub)
    return names


def _layout(block_mapping: Any) -> BlockLayout | str:
    sizes, squeezed, element, padding = [], [], [], []
    for dim in block_mapping.block_shape:
        if isinstance(dim, pallas_core.Squeezed) or dim is None:
            sizes.append(1)
            squeezed.append(True)
            element.append(False)
            padding.append((0, 0))
        elif isinstance(dim, pallas_core.Blocked):
            sizes.append(int(dim.block_size))
            squeezed.append(False)
            element.append(False)
            padding.append((0, 0))
        elif isinstance(dim, pallas_core.Element):
            sizes.append(int(dim.block_size))
            squeezed.append(False)
            element.append(True)
            padding.append(tuple(int(p) for p in dim.padding))  # type: ignore[arg-type]
        else:
            return f"it uses {type(dim).__name__} block dimensions"
    aval = block_mapping.array_aval
    return BlockLayout(
        shape=tuple(int(d) for d in aval.shape),
        dtype=np.dtype(_physical_dtype(aval.dtype)),
        block=tuple(sizes),
        squeezed=tuple(squeezed),
        element=tuple(element),
        padding=tuple(padding),
        index_map=_index_map_function(block_mapping.index_map_jaxpr),
    )


def _index_map_function(closed: Any) -> Callable[..., tuple[Any, ...]]:
    # Index maps may read scalar-prefetch refs: discharge them into plain values, as
    # Pallas' interpreter does, and keep only the block indices.
    discharged, consts = closed_parts(state_discharge.discharge_state(closed))
    count = len(inner_jaxpr(closed).outvars)

    def index_map(*args: Any) -> tuple[Any, ...]:
        values = jax_core.eval_jaxpr(discharged, consts, *args)
        return tuple(values[:count])

    return index_map


def _inner_aval(aval: Any) -> Any:
    return getattr(aval, "inner_aval", aval)


def _physical_dtype(dtype: Any) -> Any:
    # Logical dtypes (semaphores) have a physical stand-in in interpret mode.
    rules = getattr(dtype, "_rules", None)
    if rules is not None and hasattr(rules, "pallas_interpret_element_aval"):
        return rules.pallas_interpret_element_aval(dtype).dtype
    return dtype


def _program_body(params: dict[str, Any], grid: tuple[int, ...]) -> ProgramBody:
    jaxpr = params["jaxpr"]
    mapping = params["grid_mapping"]
    vmapped = set(mapping.vmapped_dims)

    # Physicalise and discharge as Pallas' interpreter does; program_id and
    # num_programs stay primitives there, even inside loops and branches.
    with mapping.trace_env():
        physical, consts = hlo_interpreter.resolve_physical_types(jaxpr, ())
        discharged, discharged_consts = closed_parts(
            state_discharge.discharge_state(with_consts(inner_jaxpr(physical), consts))
        )

    def traced(pids: Sequence[Any], *values: Any) -> list[Any]:
        if mapping.local_grid_env is not None:
            env = mapping.local_grid_env(tuple(pids), grid)
        else:
            env = tuple(
                pallas_core.GridAxis(pids[d], grid[d]) for d in range(len(grid)) if d not in vmapped
            )
        return _eval_with_grid(discharged, discharged_consts, values, env)

    pid_avals = [jax.ShapeDtypeStruct((), jnp.int32) for _ in grid]
    value_avals = []
    for var in jaxpr.invars:
        aval = _inner_aval(var.aval)
        value_avals.append(jax.ShapeDtypeStruct(aval.shape, _physical_dtype(aval.dtype)))
    closed = jax.make_jaxpr(traced)(pid_avals, *value_avals)
    num_scalars = int(mapping.num_index_operands)
    num_blocks = len(mapping.block_mappings)
    body = inner_jaxpr(closed)
    value_invars = body.invars[len(grid) :]
    if len(body.outvars) != len(value_invars):
        raise NotImplementedError("the discharged kernel body does not return every buffer")
    block_in = value_invars[num_scalars : num_scalars + num_blocks]
    block_out = body.outvars[num_scalars : num_scalars + num_blocks]
    scratch_in = value_invars[num_scalars + num_blocks :]
    changed = [o is not i for o, i in zip(block_out, block_in, strict=True)]
    # A load can leave a rebuilt (but equal) value behind after discharge: trust the
    # kernel's own write effects, falling back to the discharged dataflow.
    effects = _written_refs(jaxpr)
    if effects is not None:
        changed = [c and (num_scalars + k) in effects for k, c in enumerate(changed)]
    written = tuple(changed)
    written_outs = [o for o, w in zip(block_out, written, strict=True) if w]
    depends = _dependencies(body, written_outs)
    scratch_carries = any(v in depends for v in scratch_in)
    reads_initial = tuple(v in depends for v in block_in)
    run = jax_core.jaxpr_as_fun(closed)

    def fn(
        pids: Sequence[Any], scalars: Sequence[Any], blocks: Sequence[Any], scratch: Sequence[Any]
    ) -> tuple[list[Any], list[Any]]:
        outs = run(*pids, *scalars, *blocks, *scratch)
        return list(outs[num_scalars : num_scalars + num_blocks]), list(
            outs[num_scalars + num_blocks :]
        )

    return ProgramBody(fn, written, scratch_carries, reads_initial)


def _written_refs(jaxpr: Any) -> set[int] | None:
    """Positions of the ref arguments the kernel writes, from its state effects.

    None when the effects cannot be read.
    """
    try:
        from jax._src.state import types as state_types  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return None
    positions = {v: k for k, v in enumerate(jaxpr.invars)}
    found: set[int] = set()
    for effect in jaxpr.effects:
        if not isinstance(effect, (state_types.WriteEffect, state_types.AccumEffect)):
            continue
        target = getattr(effect, "input", getattr(effect, "input_index", None))
        if isinstance(target, (int, np.integer)):
            found.add(int(target))
        elif target in positions:
            found.add(positions[target])
        else:
            return None
    return found


def _eval_with_grid(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any], env: Any) -> list[Any]:
    """Evaluates a discharged kernel body, program ids read from `env`.

    `env` is a sequence of `GridAxis`, as Pallas' grid environment holds.

    Loops and branches whose bodies ask for program ids are rebuilt with `lax.scan`,
    `lax.while_loop` and `lax.switch` over Python functions, so the ids reach them as
    ordinary closed-over values; calls are inlined. Everything else is bound as is.
    """
    values: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    values.update(zip(jaxpr.invars, args, strict=True))

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jax_core.Literal) else values[atom]

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        inputs = [read(v) for v in eqn.invars]
        if name == "program_id":
            outs = [jnp.asarray(env[eqn.params["axis"]].index, jnp.int32)]
        elif name == "num_programs":
            outs = [jnp.asarray(env[eqn.params["axis"]].size, jnp.int32)]
        elif any(instrument.uses_grid(sub) for sub in jax_core.jaxprs_in_params(eqn.params)):
            outs = _eval_higher_order(eqn, inputs, env)
        else:
            params = eqn.primitive.get_bind_params(eqn.params)
            subfuns: Sequence[Any] = ()
            if isinstance(params, tuple):  # older JAX: (subfuns, params)
                subfuns, params = params
            traceback = eqn.source_info.traceback
            with source_info_util.user_context(traceback), eqn.ctx.manager:
                result = eqn.primitive.bind(*subfuns, *inputs, **params)
            outs = list(result) if eqn.primitive.multiple_results else [result]
        values.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _closed_fn(closed: Any, env: Any) -> Callable[..., list[Any]]:
    inner, consts = closed_parts(closed)
    return lambda *args: _eval_with_grid(inner, consts, args, env)


def _eval_higher_order(eqn: Any, inputs: list[Any], env: Any) -> list[Any]:
    name = eqn.primitive.name
    params = eqn.params
    if name == "scan":
        body = _closed_fn(params["jaxpr"], env)
        num_consts, num_carry = scan_counts(params)
        consts = inputs[:num_consts]
        carry = inputs[num_consts : num_consts + num_carry]
        xs = inputs[num_consts + num_carry :]

        def scan_body(c: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
            outs = body(*consts, *c, *x)
            return list(outs[:num_carry]), list(outs[num_carry:])

        final, ys = jax.lax.scan(
            scan_body,
            list(carry),
            list(xs),
            length=params["length"],
            reverse=params["reverse"],
            unroll=params.get("unroll", 1),
        )
        return [*final, *ys]
    if name == "while":
        cond = _closed_fn(params["cond_jaxpr"], env)
        body = _closed_fn(params["body_jaxpr"], env)
        cond_n, body_n = params["cond_nconsts"], params["body_nconsts"]
        cond_consts = inputs[:cond_n]
        body_consts = inputs[cond_n : cond_n + body_n]
        init = inputs[cond_n + body_n :]
        return list(
            jax.lax.while_loop(
                lambda c: cond(*cond_consts, *c)[0],
                lambda c: list(body(*body_consts, *c)),
                list(init),
            )
        )
    if name == "cond":
        branches = [_closed_fn(b, env) for b in params["branches"]]
        index, *operands = inputs
        return list(
            jax.lax.switch(index, [lambda *o, f=f: list(f(*o)) for f in branches], *operands)
        )
    # Calls (jit, closed_call / eval_jaxpr, custom derivatives, checkpoints ...): inline
    # the body.
    sub = call_body(params)
    if sub is not None:
        return list(_closed_fn(sub, env)(*inputs))
    raise NotImplementedError(f"program ids inside {name} are not supported by the emulator")


def _dependencies(jaxpr: Any, targets: Sequence[Any]) -> set[Any]:
    """The variables `targets` may depend on.

    Walks equations backwards; every output of an equation depends on all its inputs,
    except that a crop of a `dynamic_update_slice` lying wholly inside the update
    (how Pallas discharges a store of a whole block) depends on the update only.
    """
    producers = {o: eqn for eqn in jaxpr.eqns for o in eqn.outvars}
    needed = {t for t in targets if not isinstance(t, jax_core.Literal)}
    for eqn in reversed(jaxpr.eqns):
        if any(o in needed for o in eqn.outvars):
            inputs = _overwritten_crop_inputs(eqn, producers) or eqn.invars
            needed.update(v for v in inputs if not isinstance(v, jax_core.Literal))
    return needed


def _overwritten_crop_inputs(eqn: Any, producers: dict[Any, Any]) -> list[Any] | None:
    """The inputs a crop of an overwritten region really reads, when it is one.

    For `pad` with non-positive padding (a crop) of a `dynamic_update_slice` at constant
    indices whose update covers the crop: the update (all the crop reads); else None.
    """
    if eqn.primitive.name != "pad" or eqn.invars[0] not in producers:
        return None
    config = eqn.params["padding_config"]
    if any(lo > 0 or hi > 0 or interior != 0 for lo, hi, interior in config):
        return None
    update_eqn = producers[eqn.invars[0]]
    if update_eqn.primitive.name != "dynamic_update_slice":
        return None
    operand, update, *indices = update_eqn.invars
    if not all(isinstance(i, jax_core.Literal) for i in indices):
        return None
    shape = operand.aval.shape
    for (lo, hi, _), index, size, extent in zip(
        config, (int(i.val) for i in indices), update.aval.shape, shape, strict=True
    ):
        start = min(max(index, 0), extent - size)  # dynamic_update_slice clamps
        if not (start <= -lo and extent + hi <= start + size):
            return None
    return [update]


def uninitialized_value(dtype: Any) -> Any:
    """What Pallas' interpreter fills padding and unwritten buffers with.

    NaN for floats, the smallest integer for integers (0 for int16, which stands for
    semaphores there), False for booleans.
    """
    dtype = np.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.complexfloating):
        return np.array(np.nan, dtype)
    if pallas_core is not None and dtype == np.dtype(pallas_core.SEMAPHORE_INTERPRET_DTYPE):
        return np.array(0, dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        return np.array(np.iinfo(dtype).min, dtype)
    if dtype == np.bool_:
        return np.array(False)
    raise NotImplementedError(f"no uninitialized value for {dtype}")
