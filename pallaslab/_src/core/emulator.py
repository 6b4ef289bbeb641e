"""A fast, faithful CPU emulator for `pallas_call`.

Pallas' interpreter runs a kernel's grid one program at a time. The emulator runs the
same discharged kernel body (so the same arithmetic, masks and padding), but decides per
grid axis, from the evaluated index maps and the body's effects, whether the axis's
programs are independent:

- An axis whose programs write disjoint blocks (and share no scratch state) is
  *batched*: every block its programs read is gathered at once with the index maps,
  the body runs once under `jax.vmap`, and the blocks written are scattered back.
- An axis along which programs revisit a block, or carry scratch state, runs
  *sequentially* in a `lax.scan`, in the grid's order (the order Pallas' interpreter
  and a TPU core use).

Batching changes no program's arithmetic and preserves the order of the programs that
touch any one block, so results match `interpret=True`.

The same machinery runs a grid in other orders (seeded permutations in "waves" of
programs that read the same state, as concurrent programs would), to confirm races
dynamically, and with padding and unwritten buffers filled with other values, to find
which output tiles depend on them.

What the emulator does not cover (DMAs, semaphores, remote copies, dynamic grids ...)
goes to Pallas' own interpreter with a one-line notice.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pallaslab._src.base import messages
from pallaslab._src.core import chips, jax_adapter
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.geometry import races as geometry
from pallaslab._src.geometry.blocks import block_starts
from pallaslab._src.geometry.limits import check_programs
from pallaslab._src.records import Kernel

Mode = Literal["emulate", "interpret"]


class EmulationNotice(UserWarning):
    """A kernel ran in Pallas' interpreter instead of the emulator (says why)."""


@dataclasses.dataclass(frozen=True)
class Request:
    """What the emulator is asked to do while a program is traced.

    Hashable: it is part of JAX's compile-cache key.

    Attributes:
        mode: "emulate", or "interpret" to force Pallas' own interpreter.
        order: "" for the grid's order (batched where safe); "gpu" or "tpu" to run the
            targeted kernel's programs in a seeded order those rules allow.
        seed: Seed of that order.
        lanes: Programs per wave in that order: each wave's programs read the state
            as it was before the wave, as concurrent programs would.
        target: The kernel the order applies to (`kernel_key`); "" for all.
    """

    mode: Mode = "emulate"
    order: str = ""
    seed: int = 0
    lanes: int = 0
    target: str = ""

    def applies_to(self, key: str) -> bool:
        """Whether the order applies to the kernel with this key."""
        return not self.target or self.target == key


EMULATE = Request()
INTERPRET = Request(mode="interpret")


def kernel_key(kernel: Kernel) -> str:
    """Identifies a kernel across traces: name, grid, definition site, operand types."""
    where = f"{kernel.source.file}:{kernel.source.line}" if kernel.source else ""
    operands = ";".join(f"{o.dtype}{list(o.shape)}" for o in kernel.operands)
    return f"{kernel.name}|{list(kernel.grid)}|{where}|{operands}"


# ---------------------------------------------------------------------------
# Plans: which grid axes run batched, which sequentially, and why.


@dataclasses.dataclass(frozen=True)
class Plan:
    """How the emulator runs one kernel.

    Attributes:
        kernel: The kernel's name.
        grid: Its grid.
        batched: Grid axes whose programs run as one batch.
        sequential: Grid axes run one step at a time, in grid order.
        reasons: For each sequential axis, why (same order as `sequential`).
        fallback: Why the kernel runs in Pallas' interpreter instead ("" if it does not).
        axis_names: Names of the grid axes, for messages.
    """

    kernel: str
    grid: tuple[int, ...]
    batched: tuple[int, ...]
    sequential: tuple[int, ...]
    reasons: tuple[str, ...]
    fallback: str = ""
    axis_names: tuple[str, ...] = ()

    @property
    def emulated(self) -> bool:
        """Whether the emulator runs this kernel."""
        return not self.fallback

    @property
    def steps(self) -> int:
        """Sequential steps: programs along the sequential axes."""
        return math.prod(self.grid[a] for a in self.sequential)

    @property
    def batch(self) -> int:
        """Programs run together in each step."""
        return math.prod(self.grid[a] for a in self.batched)

    def describe(self) -> str:
        """One line: how the kernel ran."""
        if self.fallback:
            return (
                f"{self.kernel}: ran in Pallas' interpreter, one program at a time, "
                f"because {self.fallback}."
            )
        if not self.grid:
            return f"{self.kernel}: emulated (a single program)."
        parts = []
        if self.batched:
            parts.append(
                f"{self._axes(self.batched)} batched ({self.batch} program"
                f"{'s' if self.batch != 1 else ''} at once)"
            )
        if self.sequential:
            why = ", ".join(sorted(set(self.reasons), key=self.reasons.index))
            parts.append(f"{self._axes(self.sequential)} in order ({self.steps} steps: {why})")
        return f"{self.kernel}: emulated; " + "; ".join(parts) + "."

    def _axes(self, axes: Sequence[int]) -> str:
        names = [
            f"{a} ({self.axis_names[a]})"
            if a < len(self.axis_names) and not self.axis_names[a].startswith("axis")
            else str(a)
            for a in axes
        ]
        return ("axis " if len(names) == 1 else "axes ") + ", ".join(names)


def make_plan(call: adapter.KernelCall) -> Plan:
    """Decides, per grid axis, whether the emulator batches it or runs it in order."""
    record = call.record
    names = geometry.axis_names(record)
    if call.unsupported:
        return Plan(record.name, call.grid, (), (), (), call.unsupported, names)
    body = call.program
    reasons: dict[int, str] = {}
    for k, layout in enumerate(call.layouts):
        is_output = k >= call.num_inputs
        if not (is_output or body.written[k]):
            continue
        operand = record.operands[call.num_scalars + k]
        label = operand.label
        index_map = operand.index_map
        if index_map is None or not index_map.evaluable or index_map.uses_prefetch:
            why = (
                "reads scalar-prefetch values"
                if index_map is not None and index_map.uses_prefetch
                else "cannot be evaluated ahead of time"
            )
            for axis in range(len(call.grid)):
                reasons.setdefault(axis, f"the index map of {label} {why}")
            continue
        starts = clamped_starts(call, k)
        shared = geometry.sharing_axes(
            starts, call.grid, layout.block, aligned=not any(layout.element)
        )
        for axis, along in enumerate(shared):
            if along:
                reasons.setdefault(axis, f"its programs write the same blocks of {label}")
    if body.scratch_carries and call.scratch:
        parallel = geometry.parallel_axes(record, "tpu")
        for axis in range(len(call.grid)):
            if not parallel[axis]:
                reasons.setdefault(axis, "scratch buffers carry state from program to program")
        # A batched program gets a scratch buffer of its own. That matches running in
        # grid order only when each batched index's programs come one after another,
        # i.e. the axis lies outside every axis that runs in order: inside one, all its
        # programs share one buffer between steps (row-major order).
        for axis in range(len(call.grid)):
            outer = [a for a in range(axis) if a in reasons]
            if outer and axis not in reasons:
                reasons[axis] = (
                    f"its programs share one scratch buffer between steps of axis {outer[0]} "
                    "(outside it, run in order)"
                )
    sequential = tuple(a for a in range(len(call.grid)) if a in reasons)
    batched = tuple(a for a in range(len(call.grid)) if a not in reasons)
    return Plan(
        record.name,
        call.grid,
        batched,
        sequential,
        tuple(reasons[a] for a in sequential),
        "",
        names,
    )


def clamped_starts(call: adapter.KernelCall, k: int, prefetch: Sequence[Any] = ()) -> np.ndarray:
    """Each program's window start in operand `k`'s padded array, clamped.

    Clamped as `lax.dynamic_slice` clamps it; shape (programs, dims), programs in grid
    order.
    """
    layout = call.layouts[k]
    operand = call.record.operands[call.num_scalars + k]
    starts = block_starts(operand, call.grid, prefetch).reshape(-1, len(layout.shape))
    limit = np.asarray(layout.padded_shape, np.int64) - np.asarray(layout.block, np.int64)
    return np.asarray(np.clip(starts, 0, np.maximum(limit, 0)), np.int64)


# ---------------------------------------------------------------------------
# Kernel calls and plans, cached per kernel body.

_calls: weakref.WeakKeyDictionary[Any, dict[Any, tuple[adapter.KernelCall, Plan]]] = (
    weakref.WeakKeyDictionary()
)


def analyse(params: dict[str, Any], in_avals: Sequence[Any]) -> tuple[adapter.KernelCall, Plan]:
    """The emulator's view of a pallas_call and its plan (cached per kernel body)."""
    body, mapping = adapter.call_identity(params)
    key = (tuple(in_avals), id(mapping))
    try:
        per_body = _calls.setdefault(body, {})
    except TypeError:  # not weakly referenceable: no cache
        per_body = {}
    if key not in per_body or adapter.call_identity(per_body[key][0].params)[1] is not mapping:
        call = adapter.kernel_call(params, in_avals)
        _check_grid(call.grid)
        try:
            _reuse_body(call, params)
            plan = make_plan(call)
        except Exception as error:  # an unfamiliar kernel: Pallas' interpreter runs it
            plan = Plan(
                call.record.name,
                call.grid,
                (),
                (),
                (),
                f"the emulator could not analyse it ({messages.one_line(error)})",
            )
        per_body[key] = (call, plan)
    return per_body[key]


# Discharged kernel bodies by what the kernel is: a cell run again defines its kernel
# anew, and discharging it again is most of the analysis (bounded, oldest out).
_bodies: collections.OrderedDict[Any, adapter.ProgramBody] = collections.OrderedDict()
_MAX_BODIES = 64


def _reuse_body(call: adapter.KernelCall, params: dict[str, Any]) -> None:
    """Gives `call` the body of an identical kernel analysed before, or remembers its own."""
    if call.unsupported:
        return
    try:
        key = (jax_adapter.value_key(params), call.grid)
    except Exception:  # a kernel the key cannot describe is analysed afresh
        return
    body = _bodies.get(key)
    if body is None:
        _bodies[key] = call.program
        while len(_bodies) > _MAX_BODIES:
            _bodies.popitem(last=False)
    else:
        _bodies.move_to_end(key)
        vars(call)["program"] = body  # KernelCall.program is a cached_property: seed it


def check_key(call: adapter.KernelCall, plan: Plan) -> tuple[Any, ...]:
    """What the emulator's program for this kernel is built from (for the compile cache).

    The pallas_call's parameters determine `call`; the plan is derived from it but
    named anyway, being what `run_call` follows. Checks key their compiled programs
    on it (`compile_cache.compile_keyed`), so a cell run again compiles nothing.
    """
    return (call.params, plan)


def plan_for_site(site: jax_adapter.KernelSite) -> Plan:
    """The plan for a kernel found in a traced program."""
    if site.primitive != "pallas_call":
        name, kind, backend = jax_adapter.mesh_kernel_summary(site)
        where = {"mosaic_tpu": "a TPU mesh", "mosaic_gpu": "a GPU mesh"}.get(backend, "a mesh")
        chosen = adapter.requested_interpret(site.params)
        interpreter = (
            ", run by Pallas' TPU interpreter" if backend == "mosaic_tpu" and not chosen else ""
        )
        return Plan(
            name,
            (),
            (),
            (),
            (),
            f"it is a mesh kernel ({kind} on {where}{interpreter}), which the emulator "
            "does not run",
        )
    return analyse(site.params, site.in_avals)[1]


# ---------------------------------------------------------------------------
# Running a kernel call (traced: everything below builds JAX computations).


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Programs in the order they run: `pids[s, b]` is the b-th program of step s.

    Within a step, programs read the state as it was before the step. With `ordered`
    writes they then write back one by one in lane order (later lanes win), which is
    how racing programs lose each other's updates; otherwise their blocks are disjoint
    and written back at once. `valid[s, b]` is False for padding lanes.

    With `tpu_buffers`, each lane is a TPU core holding its output blocks in VMEM: a
    program whose output block differs from its core's previous one starts from
    uninitialized memory, as the TPU pipeline does not read output blocks back.
    """

    pids: np.ndarray
    valid: np.ndarray
    ordered: bool
    tpu_buffers: bool = False


def grid_schedule(grid: Sequence[int], plan: Plan) -> Schedule:
    """The plan's schedule: one step per index of the sequential axes.

    Steps follow grid order; each batches every index of the batched axes.
    """
    coords = geometry.program_coordinates(grid)
    if not grid:
        return Schedule(coords.reshape(1, 1, 0), np.ones((1, 1), bool), ordered=False)
    axes_order = [*plan.sequential, *plan.batched]
    shape = [grid[a] for a in axes_order]
    # Programs arranged as (sequential..., batched...), each keeping grid order.
    arranged = np.indices(shape, dtype=np.int64).reshape(len(grid), -1).T
    pids = np.zeros_like(arranged)
    for position, axis in enumerate(axes_order):
        pids[:, axis] = arranged[:, position]
    steps, batch = plan.steps, plan.batch
    return Schedule(pids.reshape(steps, batch, len(grid)), np.ones((steps, batch), bool), False)


def permuted_schedule(record: Kernel, backend: str, seed: int, lanes: int = 0) -> Schedule:
    """A seeded order of the grid that `backend`'s rules allow, in waves.

    A wave's programs run at the same time.

    GPU: every program may run at any time: a random permutation, `lanes` (default 4)
    programs per wave. TPU: programs run in grid order on each core; the leading
    parallel axis is split between two cores whose programs interleave at random (one
    wave holds at most one program of each core). Without a parallel axis a TPU runs
    the grid in order.
    """
    rng = np.random.default_rng(seed)
    coords = geometry.program_coordinates(record.grid)
    count = coords.shape[0]
    ndim = coords.shape[1]
    if backend == "gpu":
        width = max(1, lanes or 4)
        order = coords[rng.permutation(count)]
        waves = -(-count // width)
        pids = np.zeros((waves * width, ndim), np.int64)
        pids[:count] = order
        valid = np.arange(waves * width) < count
        return Schedule(pids.reshape(waves, width, ndim), valid.reshape(waves, width), True)
    parallel = geometry.parallel_axes(record, "tpu")
    split = next((a for a, p in enumerate(parallel) if p and record.grid[a] > 1), None)
    if split is None:
        return Schedule(coords.reshape(count, 1, ndim), np.ones((count, 1), bool), True, True)
    half = -(-record.grid[split] // 2)
    cores = [coords[coords[:, split] < half], coords[coords[:, split] >= half]]
    # Interleave the two cores' sequences at random; a wave pairs their next programs.
    steps: list[list[np.ndarray | None]] = []
    position = [0, 0]
    while position[0] < len(cores[0]) or position[1] < len(cores[1]):
        wave: list[np.ndarray | None] = [None, None]
        for core in (0, 1):
            if position[core] < len(cores[core]) and rng.random() < 0.75:
                wave[core] = cores[core][position[core]]
                position[core] += 1
        if wave[0] is None and wave[1] is None:
            continue
        steps.append(wave)
    pids = np.zeros((len(steps), 2, ndim), np.int64)
    valid = np.zeros((len(steps), 2), bool)
    for s, wave in enumerate(steps):
        for core, program in enumerate(wave):
            if program is not None:
                pids[s, core] = program
                valid[s, core] = True
    return Schedule(pids, valid, True, True)


def fill_value(dtype: Any, fill: str) -> Any:
    """The value padding and unwritten buffers hold.

    Pallas' (NaN, smallest integer, False) or, for "alt", a different ordinary value
    (for finding what depends on them).
    """
    if fill != "alt":
        return adapter.uninitialized_value(dtype)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.array(True)
    if np.issubdtype(dtype, np.integer):
        return np.array(7, dtype)
    return np.array(0.5, dtype)


def run_call(
    call: adapter.KernelCall,
    plan: Plan,
    args: Sequence[Any],
    request: Request = EMULATE,
    fill_values: dict[int, Any] | None = None,
) -> list[Any]:
    """Runs a pallas_call as `plan` says (or in the order `request` asks).

    Returns its outputs. Traced: builds the JAX computation.

    `fill_values` (operand position -> scalar, possibly traced) overrides what fills
    that operand's padding or initial contents, for checks that vary it under vmap.

    Each step runs a batch of programs with nested `jax.vmap`s, one per batched grid
    axis; an operand whose blocks do not change along a batched axis is passed
    unbatched there, so e.g. a matmul's row blocks meet its column blocks in one large
    product instead of many small ones.

    In a GPU-like order, programs that share an array share its memory: each writes
    back only the elements it stored (found by the instrumented body), so programs
    storing disjoint parts of one array never undo each other's work.
    """
    try:
        return run_probed(call, plan, args, request, fill_values)[0]
    except instrument.UnsupportedError:
        if not (request.order == "gpu" and request.applies_to(kernel_key(call.record))):
            raise
        # A body the instrumentation cannot follow: whole blocks are written back.
        return run_probed(call, plan, args, request, fill_values, share=False)[0]


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    """What an instrumented run recorded (JAX values; see `jax_adapter.instrument`).

    Attributes:
        programs: (runs, grid axes) the grid indices of each program run, in order.
        flags: (runs, sites) whether each program's access reached outside its ref.
        low: (runs, sites, rank) the smallest coordinate such an access reached.
        high: (runs, sites, rank) the largest.
        stats: Per tracked block (index among the blocked operands), the records of
            `instrument.STATS` over the whole (unpadded) array.
    """

    programs: np.ndarray
    flags: Any = None
    low: Any = None
    high: Any = None
    stats: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)


def run_probed(
    call: adapter.KernelCall,
    plan: Plan,
    args: Sequence[Any],
    request: Request = EMULATE,
    fill_values: dict[int, Any] | None = None,
    *,
    probe: instrument.Probe | None = None,
    probe_fills: Sequence[Any] = (),
    programs: np.ndarray | None = None,
    share: bool = True,
) -> tuple[list[Any], ProbeResult | None]:
    """`run_call`, with the instrumented body recording what `probe` asks.

    Returns the outputs and, with a probe, what it recorded. Element records
    (`probe.stats`) need the grid's order (no `request.order`). `programs` (grid
    indices, one row each) runs only those, one at a time in that order: a sample.
    `share=False` makes programs in a GPU order write back whole blocks.

    Raises:
        instrument.UnsupportedError: When the probe (or a GPU order's sharing) needs
            the instrumented body and it cannot follow this kernel's.
    """
    applies = request.applies_to(kernel_key(call.record))
    overrides = dict(fill_values or {})

    def filler(position: int, dtype: Any) -> Any:
        if position in overrides:
            return jnp.asarray(overrides[position], dtype)
        return fill_value(dtype, "")

    scalars = list(args[: call.num_scalars])
    inputs = list(args[call.num_scalars :])
    body = call.program
    grid = call.grid
    ndim_grid = len(grid)

    if programs is not None:
        chosen = np.asarray(programs, np.int64).reshape(-1, 1, ndim_grid)
        schedule = Schedule(chosen, np.ones(chosen.shape[:2], bool), ordered=False)
        levels = [1]
        level_of = [0] * ndim_grid
    elif applies and request.order:
        schedule = permuted_schedule(call.record, request.order, request.seed, request.lanes)
        levels = [schedule.valid.shape[1]]
        level_of = [0] * ndim_grid
    else:
        schedule = grid_schedule(grid, plan)
        levels = [grid[a] for a in plan.batched]
        level_of = [plan.batched.index(a) if a in plan.batched else -1 for a in range(ndim_grid)]
    num_steps, lanes = schedule.valid.shape
    level_shape = tuple(levels)
    carried = [k >= call.num_inputs or body.written[k] for k in range(len(call.layouts))]
    written = list(body.written)
    if probe is not None and probe.stats and schedule.ordered:
        raise ValueError("element records are kept in the grid's order only")
    # Programs that share an array (GPU orders) write back only what they stored;
    # blocks cut by BlockSpecs are written back whole, as the block-level model has it.
    stored = tuple(
        k
        for k in range(len(call.layouts))
        if carried[k]
        and written[k]
        and geometry.whole_array(call.record.operands[call.num_scalars + k])
    )
    if share and applies and request.order == "gpu" and stored:
        probe = dataclasses.replace(probe or instrument.Probe(), stored=stored)
    instrumented = call.instrumented if probe is not None else None
    if probe is not None and instrumented is None:
        if probe.flags or probe.fills or probe.stats:
            raise instrument.UnsupportedError(call.instrumentation_notice)
        probe = None  # a GPU order without stored elements: whole blocks, as before

    # Arrays as Pallas' interpreter holds them: padded to whole blocks.
    arrays: list[Any] = []
    for k, layout in enumerate(call.layouts):
        fill = filler(call.num_scalars + k, layout.dtype)
        if k < call.num_inputs:
            value = inputs[k]
        elif (k - call.num_inputs) in call.aliases:
            value = inputs[call.aliases[k - call.num_inputs]]
        else:
            value = jnp.full(layout.shape, fill, layout.dtype)
        arrays.append(_pad(value, layout, fill))
    first_scratch = call.num_scalars + len(call.layouts)
    scratch = [
        jnp.broadcast_to(
            jnp.asarray(filler(first_scratch + j, dtype), dtype),
            (*level_shape, *shape),
        )
        for j, (shape, dtype) in enumerate(call.scratch)
    ]

    # Window starts, per step and lane; and the batch levels each operand varies along.
    flat_pids = schedule.pids.reshape(num_steps * lanes, ndim_grid)
    write_starts: list[Any] = []
    read_starts: list[Any] = []
    deps: list[tuple[int, ...]] = []
    for k, layout in enumerate(call.layouts):
        ndim = len(layout.shape)
        flat = _starts(call, k, flat_pids, scalars)
        full = flat.reshape(num_steps, *level_shape, ndim)
        write_starts.append(flat.reshape(num_steps, lanes, ndim))
        if isinstance(full, np.ndarray) and not schedule.ordered:
            varying = tuple(
                level
                for level in range(len(levels))
                if levels[level] > 1 and np.any(np.ptp(full, axis=1 + level) > 0)
            )
            index = tuple(slice(None) if level in varying else 0 for level in range(len(levels)))
            read_starts.append(full[(slice(None), *index)])
        else:
            varying = tuple(range(len(levels)))
            read_starts.append(full)
        deps.append(varying)

    # Program ids: a batched axis's ids vary along its level only.
    pid_steps = schedule.pids.reshape(num_steps, *level_shape, ndim_grid)
    pid_xs = []
    for axis in range(ndim_grid):
        level = level_of[axis]
        index = tuple(slice(None) if other == level else 0 for other in range(len(levels)))
        pid_xs.append(pid_steps[(slice(None), *index, axis)].astype(np.int32))
    # Each program's linear index in grid order (for element records).
    linear = (
        np.ravel_multi_index(tuple(flat_pids.T), grid).astype(np.int32)
        if ndim_grid
        else np.zeros(num_steps * lanes, np.int32)
    ).reshape(num_steps, *level_shape)

    # Blocks every step writes at the same places (an output accumulated along the
    # sequential axes) stay in the carry as blocks: gathered once, scattered once.
    tracked = tuple(probe.stats) if probe is not None else ()
    stationary = [
        carried[k]
        and written[k]
        and num_steps > 1
        and not schedule.ordered
        and not tracked
        and isinstance(write_starts[k], np.ndarray)
        and bool(np.all(write_starts[k] == write_starts[k][:1]))
        for k in range(len(call.layouts))
    ]
    for k in range(len(call.layouts)):
        if stationary[k]:
            deps[k] = tuple(range(len(levels)))

    def program(
        pids: list[Any],
        index: Any,
        blocks: list[Any],
        scratch_values: list[Any],
        stats_blocks: dict[int, dict[str, Any]],
    ) -> tuple[list[Any], list[Any], Any]:
        if instrumented is None or probe is None:
            new_blocks, new_scratch = body.fn(pids, scalars, blocks, scratch_values)
            return new_blocks, new_scratch, None
        return instrumented.run(
            pids,
            scalars,
            blocks,
            scratch_values,
            program=index,
            probe=probe,
            fills=probe_fills,
            stats=stats_blocks,
        )

    batched_program = program
    for level in reversed(range(len(levels))):
        batched_program = jax.vmap(
            batched_program,
            in_axes=(
                [0 if level_of[a] == level else None for a in range(ndim_grid)],
                0,
                [0 if level in deps[k] else None for k in range(len(call.layouts))],
                [0] * len(scratch),
                {k: dict.fromkeys(instrument.STATS, 0) for k in tracked},
            ),
        )

    output_fills = {
        k: filler(call.num_scalars + k, call.layouts[k].dtype)
        for k in range(call.num_inputs, len(call.layouts))
    }
    stats_layouts = {
        k: dataclasses.replace(call.layouts[k], dtype=np.dtype(np.int32)) for k in tracked
    }

    def step(state: tuple[Any, ...], xs: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any]:
        held, scratch_values, previous, had_program, stats = state
        pids, index, step_read, step_write, valid = xs
        blocks = []
        for k, layout in enumerate(call.layouts):
            if stationary[k]:
                blocks.append(held[k])
                continue
            source = held[k] if carried[k] else arrays[k]
            blocks.append(_gather(source, step_read[k], layout))
        if schedule.tpu_buffers:
            # A core keeps its output block in VMEM only while consecutive programs
            # write the same block; a new block starts uninitialized.
            previous = list(previous)
            for k, fill in output_fills.items():
                same = had_program & jnp.all(previous[k] == step_write[k], axis=-1)
                shape = (lanes,) + (1,) * (blocks[k].ndim - 1)
                blocks[k] = jnp.where(
                    same.reshape(shape), blocks[k], jnp.asarray(fill, blocks[k].dtype)
                )
                previous[k] = jnp.where(valid[:, None], step_write[k], previous[k])
            had_program = had_program | valid
        lane_starts = {k: step_write[k].reshape(*level_shape, -1) for k in tracked}
        stats_blocks = {
            k: {n: _gather(stats[k][n], lane_starts[k], stats_layouts[k]) for n in instrument.STATS}
            for k in tracked
        }
        new_blocks, new_scratch, probed = batched_program(
            pids, index, blocks, scratch_values, stats_blocks
        )
        updated = list(held)
        for k, layout in enumerate(call.layouts):
            if not carried[k] or not written[k]:
                continue
            if stationary[k]:
                updated[k] = new_blocks[k]
                continue
            flat_blocks = new_blocks[k].reshape((lanes, *layout.kernel_block_shape))
            if schedule.ordered:
                masks = None
                if probed is not None and k in probed.stored:
                    stored_mask, atomic_mask = probed.stored[k]
                    before = jnp.broadcast_to(blocks[k], new_blocks[k].shape)
                    masks = (
                        stored_mask.reshape(flat_blocks.shape),
                        atomic_mask.reshape(flat_blocks.shape),
                        before.reshape(flat_blocks.shape),
                    )
                updated[k] = _write_in_order(
                    updated[k], step_write[k], flat_blocks, valid, layout, masks=masks
                )
            else:
                updated[k] = _scatter(updated[k], step_write[k], flat_blocks, layout)
        new_stats = {
            k: {
                n: _scatter(
                    stats[k][n],
                    step_write[k],
                    probed.stats[k][n].reshape((lanes, *stats_layouts[k].kernel_block_shape)),
                    stats_layouts[k],
                )
                for n in instrument.STATS
            }
            for k in tracked
        }
        if schedule.ordered:
            lane_valid = valid.reshape(level_shape)
            new_scratch = [
                jnp.where(lane_valid.reshape(level_shape + (1,) * (s.ndim - len(levels))), s, old)
                for s, old in zip(new_scratch, scratch_values, strict=True)
            ]
        ys = None
        if probe is not None and probe.flags and probed is not None:
            ys = (
                probed.flags.reshape(lanes, -1),
                probed.low.reshape(lanes, *probed.low.shape[len(levels) :]),
                probed.high.reshape(lanes, *probed.high.shape[len(levels) :]),
            )
        return (updated, list(new_scratch), previous, had_program, new_stats), ys

    held = [
        _gather(
            arrays[k], np.asarray(write_starts[k][0]).reshape(*level_shape, -1), call.layouts[k]
        )
        if stationary[k]
        else arrays[k]
        if carried[k]
        else None
        for k in range(len(call.layouts))
    ]
    xs = (
        [jnp.asarray(p) for p in pid_xs],
        jnp.asarray(linear),
        [jnp.asarray(r, jnp.int32) for r in read_starts],
        [jnp.asarray(w, jnp.int32) for w in write_starts],
        jnp.asarray(schedule.valid),
    )
    previous = [
        jnp.zeros((lanes, len(call.layouts[k].shape)), jnp.int32) if k in output_fills else None
        for k in range(len(call.layouts))
    ]
    stats_init = {
        k: {
            n: jnp.full(
                call.layouts[k].padded_shape,
                np.iinfo(np.int32).max if n.startswith("first") else -1,
                jnp.int32,
            )
            for n in instrument.STATS
        }
        for k in tracked
    }
    state = (held, scratch, previous, jnp.zeros((lanes,), bool), stats_init)
    if num_steps == 1:
        state, ys = step(state, jax.tree_util.tree_map(lambda x: x[0], xs))
        ys = jax.tree_util.tree_map(lambda y: y[None], ys)
    else:
        state, ys = lax.scan(step, state, xs)
    final = list(state[0])
    for k, layout in enumerate(call.layouts):
        if stationary[k]:
            held_block: Any = final[k]
            blocks = held_block.reshape((lanes, *layout.kernel_block_shape))
            final[k] = _scatter(
                arrays[k], jnp.asarray(write_starts[k][0], jnp.int32), blocks, layout
            )
    outputs = [
        _unpad(final[k], call.layouts[k])
        for k in range(call.num_inputs, call.num_inputs + call.num_outputs)
    ]
    if probe is None or not (probe.flags or probe.stats):
        return outputs, None
    result = ProbeResult(
        programs=flat_pids[schedule.valid.reshape(-1)],
        stats={k: {n: _unpad(v, call.layouts[k]) for n, v in state[4][k].items()} for k in tracked},
    )
    if ys is not None:
        keep = np.flatnonzero(schedule.valid.reshape(-1))
        flags, low, high = (y.reshape(num_steps * lanes, *y.shape[2:])[keep] for y in ys)
        result = dataclasses.replace(result, flags=flags, low=low, high=high)
    return outputs, result


def _pad(value: Any, layout: adapter.BlockLayout, fill: Any) -> Any:
    value = jnp.asarray(value, layout.dtype)
    config = [
        (lo, padded - dim - lo, 0)
        for dim, padded, (lo, _) in zip(
            layout.shape, layout.padded_shape, layout.padding, strict=True
        )
    ]
    if all(lo == 0 and hi == 0 for lo, hi, _ in config):
        return value
    return lax.pad(value, jnp.asarray(fill, layout.dtype), config)


def _unpad(value: Any, layout: adapter.BlockLayout) -> Any:
    lows = [lo for lo, _ in layout.padding]
    if value.shape == layout.shape:
        return value
    return lax.slice(value, lows, [lo + d for lo, d in zip(lows, layout.shape, strict=True)])


def _starts(call: adapter.KernelCall, k: int, pids: np.ndarray, scalars: Sequence[Any]) -> Any:
    """Window starts (programs, dims) for the given programs.

    NumPy when the index map is evaluable ahead of time, else computed with JAX
    (scalar prefetch).
    """
    layout = call.layouts[k]
    operand = call.record.operands[call.num_scalars + k]
    index_map = operand.index_map
    limit = np.maximum(np.asarray(layout.padded_shape) - np.asarray(layout.block), 0)
    if index_map is not None and index_map.evaluable and not index_map.uses_prefetch:
        if not call.grid:
            static = clamped_starts(call, k).reshape(1, -1)
            return np.broadcast_to(static, (pids.shape[0], static.shape[1]))
        indices = index_map.evaluate([pids[:, a] for a in range(pids.shape[1])])
        starts = (
            np.stack(
                [
                    ix if (layout.element[d] or layout.squeezed[d]) else ix * layout.block[d]
                    for d, ix in enumerate(indices)
                ],
                axis=-1,
            )
            if indices
            else np.zeros((pids.shape[0], 0), np.int64)
        )
        return np.clip(starts, 0, limit)
    columns = [jnp.asarray(pids[:, a], jnp.int32) for a in range(pids.shape[1])]
    in_axes = (0,) * len(columns) + (None,) * len(scalars)
    traced: Sequence[Any]
    if columns:
        traced = jax.vmap(layout.index_map, in_axes=in_axes)(*columns, *scalars)
    else:
        traced = [
            jnp.broadcast_to(jnp.asarray(i), (pids.shape[0],)) for i in layout.index_map(*scalars)
        ]
    stacked = jnp.stack(
        [
            jnp.asarray(ix, jnp.int32)
            * (1 if (layout.element[d] or layout.squeezed[d]) else layout.block[d])
            for d, ix in enumerate(traced)
        ],
        axis=-1,
    )
    return jnp.clip(stacked, 0, jnp.asarray(limit, jnp.int32))


def _squeeze_axes(layout: adapter.BlockLayout) -> tuple[int, ...]:
    return tuple(d + 1 for d, s in enumerate(layout.squeezed) if s)


def _gather(source: Any, starts: Any, layout: adapter.BlockLayout) -> Any:
    """Blocks at `starts` (*lanes, dims), stacked: (*lanes, *kernel block shape)."""
    lanes = starts.shape[:-1]
    flat = starts.reshape((-1, starts.shape[-1]))
    if flat.shape[0] == 1 and not lanes:
        blocks = lax.dynamic_slice(source, list(flat[0]), layout.block)[None]
    else:
        blocks = jax.vmap(lambda s: lax.dynamic_slice(source, list(s), layout.block))(flat)
    blocks = lax.squeeze(blocks, _squeeze_axes(layout))
    return blocks.reshape((*lanes, *layout.kernel_block_shape))


def _scatter(target: Any, starts: Any, blocks: Any, layout: adapter.BlockLayout) -> Any:
    """Writes disjoint blocks (lanes, *kernel block shape) at `starts` into `target`."""
    lanes = blocks.shape[0]
    if lanes == 1:
        return lax.dynamic_update_slice(target, blocks.reshape(layout.block), list(starts[0]))
    full = blocks.reshape((lanes, *layout.block))
    ndim = len(layout.block)
    numbers = lax.ScatterDimensionNumbers(
        update_window_dims=tuple(range(1, ndim + 1)),
        inserted_window_dims=(),
        scatter_dims_to_operand_dims=tuple(range(ndim)),
    )
    return lax.scatter(
        target,
        starts,
        full,
        numbers,
        indices_are_sorted=False,
        unique_indices=True,
        mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )


def _write_in_order(
    target: Any,
    starts: Any,
    blocks: Any,
    valid: Any,
    layout: adapter.BlockLayout,
    *,
    masks: tuple[Any, Any, Any] | None = None,
) -> Any:
    """Writes each lane's block in lane order (later lanes win); skips invalid lanes.

    With `masks` (stored, atomically updated, the block as the lane read it), a lane
    writes only the elements it stored, and adds what its atomic updates added.
    """
    full = blocks.reshape((blocks.shape[0], *layout.block))
    if masks is not None:
        stored, atomic, before = (m.reshape(full.shape) for m in masks)
    for lane in range(full.shape[0]):
        where = list(starts[lane])
        current = lax.dynamic_slice(target, where, layout.block)
        if masks is None:
            block = jnp.where(valid[lane], full[lane], current)
        else:
            added = current + (full[lane] - before[lane]) if current.dtype != bool else current
            merged = jnp.where(stored[lane], full[lane], jnp.where(atomic[lane], added, current))
            block = jnp.where(valid[lane], merged, current)
        target = lax.dynamic_update_slice(target, block, where)
    return target


# ---------------------------------------------------------------------------
# The lowering hook: decides, for each pallas_call lowered, who runs it.


def lowering_impl(
    params: dict[str, Any], in_avals: Sequence[Any], auto: bool
) -> Callable[..., list[Any]] | str | None:
    """Called by the adapter's lowering rule for every pallas_call.

    Returns a function computing the call's outputs when the emulator runs it;
    "interpret" when Pallas' interpreter must; None to leave the call to JAX.
    """
    request = adapter.emulation_request()
    interpret = adapter.interpret_kind(adapter.requested_interpret(params))
    if request is None:
        # Without a request: kernels that did not ask for an interpreter, on a
        # backend that cannot compile them (pallaslab's CPU rule), are emulated.
        if interpret or not auto:
            return None
        request = EMULATE
    # Both run every program, one by one or batched: bounded before anything runs.
    _check_grid(jax_adapter.written_grid(params))
    if not isinstance(request, Request) or request.mode == "interpret":
        return "interpret"
    call, plan = analyse(params, in_avals)
    if plan.fallback:
        # One line, no source line: the lowering happens far from the user's code.
        warnings.warn_explicit(plan.describe(), EmulationNotice, "pallaslab", 0)
        return "interpret"

    def impl(*args: Any) -> list[Any]:
        return run_call(call, plan, args, request)

    return impl


def _check_grid(grid: Sequence[int | None]) -> None:
    """Refuses, with a clear error, grids too large to run program by program on CPU."""
    if all(n is not None and n >= 0 for n in grid):
        check_programs(
            [int(n) for n in grid if n is not None],
            "run on CPU (the emulator and Pallas' interpreter run every program)",
        )


def _failed(params: dict[str, Any], error: BaseException) -> None:
    name = adapter.call_name(params)
    message = (
        f"{name}: ran in Pallas' interpreter, one program at a time, because the "
        f"emulator failed ({messages.one_line(error)})."
    )
    warnings.warn_explicit(message, EmulationNotice, "pallaslab", 0)


# Registered on import: wherever pallaslab's CPU lowering rule is installed, the
# emulator is consulted.
jax_adapter.set_emulator(lowering_impl, _failed)


def install() -> str | None:
    """Lets pallas_calls run emulated on CPU (and interpreted where not covered).

    Returns a notice when this JAX cannot run the emulator.
    """
    jax_adapter.set_emulator(lowering_impl, _failed)
    notice = jax_adapter.install_cpu_interpret()
    if notice:
        return notice
    if adapter.UNAVAILABLE:
        return f"the emulator is unavailable: {adapter.UNAVAILABLE}"
    return None


# ---------------------------------------------------------------------------
# For scripts.


def emulate(
    fn: Callable[..., Any],
    *,
    interpret: bool = False,
    order: str | None = None,
    seed: int = 0,
) -> Callable[..., Any]:
    """`fn` with every `pallas_call` in it run by pallaslab's emulator.

    Works on any backend (the emulator is plain JAX) and with `jax.jit`-compiled
    functions: the emulation request is part of JAX's cache key, so `fn` is traced
    again under it. Kernels the emulator does not cover (DMAs, semaphores, remote
    copies, dynamic grids) run in Pallas' interpreter, with a one-line
    `EmulationNotice` saying why.

    Args:
        fn: Any function calling Pallas kernels (jitted or not).
        interpret: Run Pallas' own interpreter instead (for comparison).
        order: "gpu" or "tpu": run every kernel's programs in a seeded order that
            backend's rules allow (concurrent programs reading the same state; TPU
            cores not reading output blocks back), to see races change the result.
            None: the grid's order, as Pallas' interpreter runs it.
        seed: Seed of that order.

    Example:
        >>> fast = pallaslab.emulate(matmul)
        >>> fast(a, b)  # same result as interpret=True, much sooner
        >>> pallaslab.emulate(matmul, order="gpu", seed=1)(a, b)  # a GPU-like order
    """
    if order not in (None, "gpu", "tpu"):
        raise ValueError(f'order must be "gpu", "tpu" or None, not {order!r}')
    if interpret:
        request = INTERPRET
    elif order:
        request = Request(order=order, seed=int(seed))
    else:
        request = EMULATE

    @functools.wraps(fn)
    def emulated(*args: Any, **kwargs: Any) -> Any:
        install()
        backend = jax.default_backend()
        if backend != "cpu":
            jax_adapter.install_platform_rule(backend)
        jax_adapter.forget_kernel_traces()  # kernels reused on another grid trace afresh
        with (
            adapter.emulation_scope(request),
            jax_adapter.auto_interpret(),
            _forced(request),
            chips.tracing_chip(),
        ):
            return fn(*args, **kwargs)

    return emulated


def _forced(request: Request) -> Any:
    return jax_adapter.forced_interpret(request.mode == "interpret")


def scope(request: Request | None) -> Any:
    """A context manager: pallas_calls traced within it follow `request`."""
    return adapter.emulation_scope(request)


def iter_plans(sites: Sequence[jax_adapter.KernelSite]) -> Iterator[Plan]:
    """The emulator's plan for each kernel of a program."""
    for site in sites:
        yield plan_for_site(site)
