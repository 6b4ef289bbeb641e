"""Walking a Mosaic GPU body for every program at once: control flow, copies, products.

The walker follows the body's jaxpr the way each program (a CTA's warpgroup) would
run it, for all programs at once: integer scalars (indices, loop counters,
predicates) are NumPy arrays over the programs (`values`), loops run step by step,
`cond`s split the programs between their branches, `while` loops run each program
until its own condition fails. Nothing else is computed: data, floats and arrays
are unknown, which is all that deciding where copies go and how often needs.

On the way it records every copy between GMEM and the chip (TMA copies, loads and
stores of GMEM refs) with its window per program, every matrix product, the work
of elementwise arithmetic, and how often each pipeline runs. `Recorder` holds what
it found; `plan.py` makes records of it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.core.jax_adapter.kernels import user_location
from pallaslab._src.core.jax_adapter.mosaic_gpu import refs, values
from pallaslab._src.core.jax_adapter.mosaic_gpu.values import Value
from pallaslab._src.core.jax_adapter.probes import CALL_PRIMITIVES, jax_core
from pallaslab._src.core.jax_adapter.shapes import inner_jaxpr, scoped_refs
from pallaslab._src.core.jax_adapter.work import _ELEMENTWISE, _REDUCTIONS, _TRANSCENDENTAL
from pallaslab._src.records import SourceLocation

# Equations evaluated at most (each over all programs at once): about 10 s on a laptop.
MAX_EQUATIONS = 500_000
# A `while` loop stops being followed after this many steps.
MAX_WHILE_STEPS = 1 << 16
# Loops without copies or products inside, longer than this, are counted from one step.
SHORTCUT_LENGTH = 16
_EVENTS = frozenset(
    {
        "copy_gmem_to_smem",
        "copy_smem_to_gmem",
        "wgmma",
        "wgmma_ref",
        "tcgen05_mma",
        "get",
        "swap",
        "addupdate",
        "while",
        "cond",
        "axis_index",
    }
)
PIPELINE_FILE = "mosaic_gpu/pipeline.py"
HELPERS_FILE = "mosaic_gpu/helpers.py"


class OutOfBudgetError(Exception):
    """More equations than `MAX_EQUATIONS`: the counts so far are partial."""


@dataclasses.dataclass(frozen=True)
class Ref:
    """A ref value: which buffer it is."""

    buffer: int


@dataclasses.dataclass
class Buffer:
    """Memory the body reaches: a kernel operand (GMEM) or an allocation.

    Attributes:
        space: "gmem", "smem", "tmem" or "regs".
        operand: The kernel operand, for GMEM.
        allocation: The allocation's index (`plan.Allocations`), for the others.
        aval: Its abstract value (shape and dtype as stored).
    """

    space: str
    operand: int | None
    allocation: int | None
    aval: Any


@dataclasses.dataclass
class CopyRecord:
    """One copy line, counted over the grid."""

    kind: str
    operand: int
    smem: int | None
    window: tuple[int, ...]
    dtype: str
    bytes_each: int
    multicast: int
    location: SourceLocation | None
    pipeline: tuple[Any, ...] | None
    copies: int = 0
    exact: bool = True


@dataclasses.dataclass
class MmaRecord:
    """One matrix product line, counted over the grid."""

    kind: str
    m: int
    n: int
    k: int
    lhs_dtype: str
    rhs_dtype: str
    acc_dtype: str
    lhs_memory: str
    lhs_transforms: tuple[Any, ...]
    rhs_transforms: tuple[Any, ...]
    collective: str
    location: SourceLocation | None
    count: int = 0
    exact: bool = True


@dataclasses.dataclass
class WindowEvent:
    """One execution of a copy: which programs ran it and where it landed for each."""

    operand: int
    direction: str
    mask: np.ndarray
    starts: list[Value] | None
    sizes: list[int]


@dataclasses.dataclass
class Recorder:
    """What a walk found."""

    copies: dict[int, CopyRecord] = dataclasses.field(default_factory=dict)
    mmas: dict[int, MmaRecord] = dataclasses.field(default_factory=dict)
    windows: list[WindowEvent] = dataclasses.field(default_factory=list)
    # Pipeline key -> per first equation of its call, per program, how often it ran.
    pipeline_runs: dict[tuple[Any, ...], dict[int, np.ndarray]] = dataclasses.field(
        default_factory=dict
    )
    # Pipeline key -> per SMEM buffer its copies use, per program, how many copies.
    pipeline_buffers: dict[tuple[Any, ...], dict[int, np.ndarray]] = dataclasses.field(
        default_factory=dict
    )
    # Persistent loops: (location, trips per program).
    loops: list[tuple[SourceLocation | None, np.ndarray, bool]] = dataclasses.field(
        default_factory=list
    )
    flops: int = 0
    transcendentals: int = 0
    exact: bool = True
    notices: list[str] = dataclasses.field(default_factory=list)
    reductions: bool = False

    def inexact(self, notice: str) -> None:
        self.exact = False
        if notice not in self.notices:
            self.notices.append(notice)


def _frames(eqn: Any) -> list[Any]:
    traceback = getattr(eqn.source_info, "traceback", None)
    return list(getattr(traceback, "frames", ()) or ()) if traceback is not None else []


class Walker:
    """Runs a body for `programs` programs at once (see the module docstring).

    Args:
        programs: How many programs (CTAs x warpgroups).
        axes: Per mesh axis name, its index for each program (an int array).
        sizes: Per mesh axis name, its size.
        buffers: The buffers known before the walk (the kernel's operands);
            allocations are added by `allocate`.
        allocations: Per allocated variable (by id), its allocation index.
    """

    def __init__(
        self,
        programs: int,
        axes: dict[str, np.ndarray],
        sizes: dict[str, int],
        buffers: list[Buffer],
        allocations: dict[int, int],
    ) -> None:
        self.programs = programs
        self.axes = axes
        self.sizes = sizes
        self.buffers = buffers
        self.allocations = allocations
        self.allocated: dict[int, int] = {}  # allocation index -> buffer
        self.found = Recorder()
        self.env: dict[Any, Any] = {}
        self.budget = MAX_EQUATIONS
        self._pipeline: tuple[Any, ...] | None = None
        self.where: SourceLocation | None = None
        self._statics: dict[int, _Static] = {}
        self._literals: dict[int, tuple[Any, Any]] = {}
        self._memo: dict[tuple[int, str], Any] = {}
        self._pure: dict[int, bool] = {}

    # -- values ------------------------------------------------------------------

    def read(self, var: Any) -> Any:
        if isinstance(var, jax_core.Literal):
            key = id(var)
            if key not in self._literals:
                self._literals[key] = (var, values.literal(var.val))  # keeps `var` alive
            return self._literals[key][1]
        if isinstance(var, (int, np.integer, bool, np.bool_)):
            return values.literal(var)
        return self.env.get(var)

    def _bind(self, variables: Sequence[Any], inputs: Sequence[Any]) -> None:
        for var, value in zip(variables, inputs, strict=False):
            self.env[var] = value

    def run(
        self, closed: Any, inputs: Sequence[Any], mask: np.ndarray, *, open_jaxpr: bool = False
    ) -> list[Any]:
        """Evaluates a (closed) jaxpr on `inputs` for the programs in `mask`.

        `open_jaxpr`: the equation binds the jaxpr's constvars itself (`run_scoped`:
        its inputs are the refs it closes over), whatever consts the jaxpr carries.
        """
        jaxpr = inner_jaxpr(closed)
        consts = [] if open_jaxpr else list(getattr(closed, "consts", ()) or ())
        constvars = list(jaxpr.constvars)
        if consts and len(consts) == len(constvars):
            self._bind(constvars, [self._constant(c) for c in consts])
            self._bind(jaxpr.invars, inputs)
        else:  # open jaxprs whose constvars the equation binds (run_scoped)
            self._bind([*constvars, *jaxpr.invars], inputs)
        for eqn in jaxpr.eqns:
            self.equation(eqn, mask)
        return [self.read(v) for v in jaxpr.outvars]

    def _constant(self, value: Any) -> Any:
        try:
            return values.literal(np.asarray(value))
        except (TypeError, ValueError):
            return None

    # -- equations ---------------------------------------------------------------

    def equation(self, eqn: Any, mask: np.ndarray) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise OutOfBudgetError
        static = self._static(eqn)
        outer_where, outer_pipeline = self.where, self._pipeline
        self.where = static.where or outer_where
        if static.pipeline is not None and outer_pipeline is None:
            # The first equation of a pipeline call: everything inside it is the pipeline's
            # (equations traced inside its loops keep only part of their traceback).
            self._pipeline = (self.where, static.pipeline)
            entries = self.found.pipeline_runs.setdefault(self._pipeline, {})
            runs = entries.setdefault(id(eqn), np.zeros(self.programs, np.int64))
            runs += mask
        try:
            outs = self._evaluate(eqn, static, mask)
        finally:
            self.where, self._pipeline = outer_where, outer_pipeline
        if outs is None:
            outs = [None] * len(eqn.outvars)
        self._bind(eqn.outvars, outs)

    def memo(self, eqn: Any, key: str, compute: Any) -> Any:
        """What `compute()` gives for an equation, computed on its first run only."""
        slot = (id(eqn), key)
        if slot not in self._memo:
            self._memo[slot] = compute()
        return self._memo[slot]

    def _static(self, eqn: Any) -> _Static:
        key = id(eqn)
        found = self._statics.get(key)
        if found is None:
            found = self._statics[key] = _static_of(eqn)
        return found

    def _evaluate(self, eqn: Any, static: _Static, mask: np.ndarray) -> list[Any] | None:
        if static.handler is not None:
            found: list[Any] | None = static.handler(self, eqn, mask)
            return found
        if static.call is not None:
            return self.run(static.call, [self.read(v) for v in eqn.invars], mask)
        if static.subs:  # an unfamiliar primitive with a body: its events, counted once
            for sub in static.subs:
                self.run(sub, [None] * len(inner_jaxpr(sub).invars), mask)
            name = eqn.primitive.name
            self.found.inexact(f"{name}: a primitive pallaslab does not follow; counted once.")
            return None
        if static.work is not None:
            self._work(eqn, static.work, mask)
        if not static.scalar:
            return None
        inputs = [self.read(v) for v in eqn.invars]
        return [values.evaluate(eqn.primitive.name, eqn.params, inputs, None)]

    def _work(self, eqn: Any, work: tuple[str, int], mask: np.ndarray) -> None:
        kind, amount = work
        active = int(np.count_nonzero(mask))
        if kind == "transcendentals":
            self.found.transcendentals += amount * active
            return
        self.found.flops += amount * active
        if kind == "reduction":
            self.found.reductions = True
        elif kind == "dot":
            m, n, depth, batch = self.memo(eqn, "dot", lambda: _dot_shape(eqn))
            lhs, rhs, out = (v.aval for v in (*eqn.invars[:2], eqn.outvars[0]))
            record = self.mma(
                eqn,
                "dot",
                (m, n, depth),
                (refs.dtype_name(lhs), refs.dtype_name(rhs), refs.dtype_name(out)),
                lhs_memory="registers",
                lhs_t=(),
                rhs_t=(),
            )
            record.count += active * batch

    # -- records -----------------------------------------------------------------

    def mma(
        self,
        eqn: Any,
        kind: str,
        mnk: tuple[int, int, int],
        dtypes: tuple[str, str, str],
        *,
        lhs_memory: str,
        lhs_t: tuple[Any, ...],
        rhs_t: tuple[Any, ...],
        collective: str = "",
    ) -> MmaRecord:
        """The record of one product line (made on its first run)."""
        key = id(eqn)
        if key not in self.found.mmas:
            self.found.mmas[key] = MmaRecord(
                kind,
                *mnk,
                *dtypes,
                lhs_memory,
                refs.written_transforms(lhs_t),
                refs.written_transforms(rhs_t),
                collective,
                self.where,
            )
        return self.found.mmas[key]

    def buffer_of(self, value: Any) -> Buffer | None:
        return self.buffers[value.buffer] if isinstance(value, Ref) else None

    def copy_event(
        self,
        eqn: Any,
        mask: np.ndarray,
        kind: str,
        *,
        gmem: tuple[Any, tuple[Any, ...]],
        smem: tuple[Any, tuple[Any, ...]] | None = None,
        multicast: int = 1,
        exact: bool = True,
    ) -> None:
        """Records one execution of a copy (or load, or store) between GMEM and the chip.

        `gmem` and `smem` are each side's (ref variable, transforms).
        """
        gmem_ref, gmem_transforms = gmem
        buffer = self.buffer_of(self.read(gmem_ref))
        if buffer is None or buffer.space != "gmem" or buffer.operand is None:
            return  # not a kernel operand in GMEM (SMEM to SMEM, a semaphore...)
        aval = buffer.aval
        found = refs.window(tuple(aval.shape), gmem_transforms, self.read)
        if found is not None:
            starts, sizes = found
        else:
            starts = None
            shape = self.memo(
                eqn, "shape", lambda: refs.logical_shape(aval, gmem_transforms) or aval.shape
            )
            sizes = list(shape)
        smem_buffer = self.buffer_of(self.read(smem[0])) if smem is not None else None
        smem_index = smem_buffer.allocation if smem_buffer is not None else None
        key = id(eqn)
        record = self.found.copies.get(key)
        if record is None:
            record = self.found.copies[key] = CopyRecord(
                kind=kind,
                operand=buffer.operand,
                smem=smem_index,
                window=tuple(sizes),
                dtype=refs.dtype_name(aval),
                bytes_each=math.prod(sizes) * refs.itemsize(aval),
                multicast=multicast,
                location=self.where,
                pipeline=self._pipeline if made_by_pipeline(eqn) else None,
            )
        active = int(np.count_nonzero(mask))
        record.copies += active
        record.exact = record.exact and exact
        if record.pipeline is not None and smem_index is not None:
            used = self.found.pipeline_buffers.setdefault(record.pipeline, {})
            counts = used.setdefault(smem_index, np.zeros(self.programs, np.int64))
            counts += mask
        if active:
            direction = "read" if kind in ("tma-load", "load") else "write"
            self.found.windows.append(
                WindowEvent(buffer.operand, direction, mask.copy(), starts, list(sizes))
            )

    def pure(self, closed: Any) -> bool:
        """Whether a body has no copies, products, loops or branches inside (at any depth)."""
        jaxpr = inner_jaxpr(closed)
        key = id(jaxpr)
        if key not in self._pure:
            self._pure[key] = all(
                eqn.primitive.name not in _EVENTS
                and eqn.primitive.name != "dot_general"
                and all(self.pure(s) for s in jax_core.jaxprs_in_params(eqn.params))
                for eqn in jaxpr.eqns
            )
        return self._pure[key]


def pipeline_kind(eqn: Any) -> str | None:
    """Which pipeline helper made an equation, if one did (from its traceback)."""
    inside = [f for f in _frames(eqn) if PIPELINE_FILE in f.file_name.replace("\\", "/")]
    if not inside:
        return None
    if any("warp_specialized" in f.function_name for f in inside):
        return "emit_pipeline_warp_specialized"
    return "emit_pipeline"


def made_by_pipeline(eqn: Any) -> bool:
    """Whether a pipeline helper itself issued an equation (not the body it runs).

    The innermost frame that is either the helper's or outside JAX decides.
    """
    for frame in _frames(eqn):
        name = frame.file_name.replace("\\", "/")
        if PIPELINE_FILE in name:
            return True
        if "/jax/_src/" not in name:
            return False
    return False


@dataclasses.dataclass(frozen=True)
class _Static:
    """What the walker needs of an equation that does not change from run to run."""

    handler: Any
    call: Any
    subs: tuple[Any, ...]
    scalar: bool
    work: tuple[str, int] | None
    where: SourceLocation | None
    pipeline: str | None


def _static_of(eqn: Any) -> _Static:
    name = eqn.primitive.name
    handler = _HANDLERS.get(name)
    subs = () if handler is not None else tuple(jax_core.jaxprs_in_params(eqn.params))
    call = None
    if name in CALL_PRIMITIVES and len(subs) == 1:
        call = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr", subs[0]))
        subs = ()
    outs = eqn.outvars
    return _Static(
        handler=handler,
        call=call,
        subs=subs,
        scalar=len(outs) == 1 and values.is_scalar(outs[0].aval),
        work=_work_of(eqn) if handler is None and call is None and not subs else None,
        where=user_location(eqn.source_info),
        pipeline=pipeline_kind(eqn),
    )


def _work_of(eqn: Any) -> tuple[str, int] | None:
    """(kind, amount per program) of an equation's arithmetic on floats, if any."""
    name = eqn.primitive.name
    if not eqn.outvars:
        return None
    aval = eqn.outvars[0].aval
    if name == "dot_general":
        m, n, depth, batch = _dot_shape(eqn)
        return "dot", 2 * m * n * depth * batch
    if name in _REDUCTIONS:
        return "reduction", _size(eqn.invars[0].aval)
    if not _floating(aval):
        return None
    if name in _TRANSCENDENTAL:
        return "transcendentals", _size(aval)
    if name in _ELEMENTWISE:
        return "flops", _size(aval)
    return None


def _dot_shape(eqn: Any) -> tuple[int, int, int, int]:
    """(m, n, k, batch) of a `dot_general`."""
    (lhs_contracting, _), (lhs_batch, _) = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval
    size = _size(eqn.outvars[0].aval)
    depth = math.prod(lhs.shape[d] for d in lhs_contracting)
    batch = math.prod(lhs.shape[d] for d in lhs_batch)
    free = [d for d in range(len(lhs.shape)) if d not in (*lhs_contracting, *lhs_batch)]
    m = math.prod(lhs.shape[d] for d in free)
    return m, size // max(1, m * batch), depth, batch


def _floating(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    try:
        return (dtype is not None and np.dtype(dtype).kind in "fc") or "float" in str(dtype)
    except TypeError:
        return False


def _size(aval: Any) -> int:
    return math.prod(getattr(aval, "shape", ()) or ())


# Handlers live in `control` and `events`; they register themselves here.
_HANDLERS: dict[str, Any] = {}


def handles(*names: str) -> Any:
    def register(fn: Any) -> Any:
        for name in names:
            _HANDLERS[name] = fn
        return fn

    return register


def scoped_inputs(walker: Walker, eqn: Any) -> list[Any]:
    """A run_scoped's body inputs: the refs it closes over, then its new allocations."""
    closed_over, allocated = scoped_refs(eqn)
    inputs: list[Any] = [walker.read(v) for v in eqn.invars]
    for var in allocated:
        index = walker.allocations.get(id(var))
        if index is None:
            inputs.append(None)
            continue
        if index not in walker.allocated:
            walker.allocated[index] = len(walker.buffers)
            walker.buffers.append(Buffer(refs.memory_space(var.aval), None, index, var.aval))
        inputs.append(Ref(walker.allocated[index]))
    del closed_over
    return inputs
