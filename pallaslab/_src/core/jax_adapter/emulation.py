"""Reading a `pallas_call` for pallaslab's emulator.

The emulator (`core/emulator/`) needs, from JAX's internals: the kernel body as a pure
function of program ids and block values (`program_body`), how each operand is cut
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

import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.core.jax_adapter.body_eval import (
    hlo_interpreter,
    inner_aval,
    missing,
    pallas_core,
    physical_dtype,
    state_discharge,
)
from pallaslab._src.core.jax_adapter.kernels import KernelSite, kernel_from_site
from pallaslab._src.core.jax_adapter.probes import PALLAS_CALL, jax_core
from pallaslab._src.core.jax_adapter.program_body import ProgramBody, program_body
from pallaslab._src.core.jax_adapter.shapes import (
    closed_parts,
    discharge,
    inner_jaxpr,
)
from pallaslab._src.records import Kernel

try:
    from jax._src import config as jax_config
except ImportError:  # pragma: no cover - the emulator is then unavailable
    jax_config = None  # type: ignore[assignment]


def _available() -> str:
    return missing(
        (
            (hlo_interpreter, "resolve_physical_types"),
            (pallas_core, "grid_env"),
            (pallas_core, "GridAxis"),
            (state_discharge, "discharge_state"),
            (getattr(jax_config, "config_ext", None), "Config"),
        )
    )


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
        return program_body(self.params, self.grid)

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
        # A body doing what the evaluator does not follow is a decision, said in the
        # checks' notices; any other error is pallaslab's failure and propagates.
        try:
            return instrument.instrumented_body(self.params, self.grid), ""
        except instrument.UnsupportedError as error:
            return None, f"its loads and stores could not be followed ({error})"


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
        layout = _layout(block_mapping, mapping)
        if isinstance(layout, str):
            unsupported = unsupported or layout
            continue
        layouts.append(layout)
    scratch = tuple(
        (tuple(aval.shape), np.dtype(physical_dtype(aval.dtype)))
        for aval in (inner_aval(a) for a in mapping.scratch_avals)
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


def _layout(block_mapping: Any, grid_mapping: Any) -> BlockLayout | str:
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
        dtype=np.dtype(physical_dtype(aval.dtype)),
        block=tuple(sizes),
        squeezed=tuple(squeezed),
        element=tuple(element),
        padding=tuple(padding),
        index_map=_index_map_function(block_mapping.index_map_jaxpr, grid_mapping),
    )


def _index_map_function(closed: Any, grid_mapping: Any) -> Callable[..., tuple[Any, ...]]:
    # Index maps may read scalar-prefetch refs: discharge them into plain values, as
    # Pallas' interpreter does, and keep only the block indices. An index map of a grid
    # sized at run time may ask `pl.num_programs`: it is answered in the grid's context.
    with _grid_context(grid_mapping):
        discharged, consts = closed_parts(discharge(closed))
    count = len(inner_jaxpr(closed).outvars)

    def index_map(*args: Any) -> tuple[Any, ...]:
        with _grid_context(grid_mapping):
            values = jax_core.eval_jaxpr(discharged, consts, *args)
        return tuple(values[:count])

    return index_map


def _grid_context(grid_mapping: Any) -> Any:
    """Pallas' grid context of a call (what `pl.num_programs` reads while tracing)."""
    enter = getattr(pallas_core, "tracing_grid_env", None)
    if enter is None:  # pragma: no cover - depends on the JAX version
        return contextlib.nullcontext()
    return enter(tuple(grid_mapping.grid), tuple(grid_mapping.vmapped_dims))


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
    if jnp.issubdtype(dtype, jnp.integer):  # jnp's iinfo knows int4 and the like
        return np.array(jnp.iinfo(dtype).min, dtype)
    if dtype == np.bool_:
        return np.array(False)
    raise NotImplementedError(f"no uninitialized value for {dtype}")


def with_grid_sizes(
    params: dict[str, Any], in_avals: Sequence[Any], operands: Sequence[Any]
) -> tuple[dict[str, Any], tuple[Any, ...], list[Any]]:
    """A pallas_call whose grid is sized at run time, sized by the values it ran with.

    Its leading operands are the sizes of its dynamic grid axes (`grid=(n,)` with `n`
    traced): given their values, the call is the same kernel on a static grid, which
    the emulator runs. Returns its parameters, operand types and operands without
    those sizes (unchanged for a static grid).
    """
    mapping = params["grid_mapping"]
    count = sum(1 for d in mapping.grid if not isinstance(d, (int, np.integer)))
    if not count:
        return params, tuple(in_avals), list(operands)
    sizes = iter(int(np.asarray(v)) for v in operands[:count])
    grid = tuple(int(d) if isinstance(d, (int, np.integer)) else next(sizes) for d in mapping.grid)
    return (
        dict(params, grid_mapping=mapping.replace(grid=grid)),
        tuple(in_avals[count:]),
        list(operands[count:]),
    )
