"""Running one pallas_call as its plan (or a requested order) says, traced in JAX."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pallaslab._src.core.emulator.blocks import (
    fill_value,
    gather,
    pad,
    scatter,
    starts_of,
    unpad,
    write_in_order,
)
from pallaslab._src.core.emulator.plans import Plan
from pallaslab._src.core.emulator.requests import EMULATE, Request, kernel_key
from pallaslab._src.core.emulator.schedules import Schedule, grid_schedule, permuted_schedule
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.geometry import races as geometry


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
        writes: Per output asked for (`record_writes`), the block each program left,
            (runs, *block) in the order `programs` lists them.
    """

    programs: np.ndarray
    flags: Any = None
    low: Any = None
    high: Any = None
    stats: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    writes: dict[int, Any] = dataclasses.field(default_factory=dict)


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
    record_writes: tuple[int, ...] = (),
) -> tuple[list[Any], ProbeResult | None]:
    """`run_call`, with the instrumented body recording what `probe` asks.

    Returns the outputs and, with a probe (or `record_writes`), what it recorded.
    Element records (`probe.stats`) need the grid's order (no `request.order`).
    `programs` (grid indices, one row each) runs only those, one at a time in that
    order: a sample. `share=False` makes programs in a GPU order write back whole
    blocks. `record_writes` (indices of blocked operands that are outputs) keeps the
    block each program leaves in those outputs.

    Raises:
        instrument.UnsupportedError: When the probe (or a GPU order's sharing) needs
            the instrumented body and it cannot follow this kernel's.
    """
    # The user's kernel is traced already; pallaslab's own arithmetic around it (window
    # starts, fills, write-backs) broadcasts and promotes as JAX does by default,
    # whatever the user's `jax_numpy_rank_promotion` / `jax_numpy_dtype_promotion`.
    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
        return _run_probed(
            call,
            plan,
            args,
            request,
            fill_values,
            probe=probe,
            probe_fills=probe_fills,
            programs=programs,
            share=share,
            record_writes=record_writes,
        )


def _run_probed(
    call: adapter.KernelCall,
    plan: Plan,
    args: Sequence[Any],
    request: Request,
    fill_values: dict[int, Any] | None,
    *,
    probe: instrument.Probe | None,
    probe_fills: Sequence[Any],
    programs: np.ndarray | None,
    share: bool,
    record_writes: tuple[int, ...],
) -> tuple[list[Any], ProbeResult | None]:
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

    schedule, levels, level_of = _schedule(call, plan, request if applies else EMULATE, programs)
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
        arrays.append(pad(value, layout, fill))
    first_scratch = call.num_scalars + len(call.layouts)
    scratch = [
        jnp.broadcast_to(
            jnp.asarray(filler(first_scratch + j, dtype), dtype),
            (*level_shape, *shape),
        )
        for j, (shape, dtype) in enumerate(call.scratch)
    ]

    flat_pids = schedule.pids.reshape(num_steps * lanes, ndim_grid)
    write_starts, read_starts, deps = _window_starts(call, schedule, levels, flat_pids, scalars)
    pid_xs, linear = _program_ids(schedule, levels, level_of, flat_pids, grid)

    # Blocks every step writes at the same places (an output accumulated along the
    # sequential axes) stay in the carry as blocks: gathered once, scattered once.
    tracked = tuple(probe.stats) if probe is not None else ()
    stationary = [
        carried[k]
        and written[k]
        and num_steps > 1
        and not schedule.ordered
        and not tracked
        and k not in record_writes
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
    # Outputs a TPU reads back when revisited (`pl.RevisitMode.ANY`) keep their contents.
    reread = {
        k for k in output_fills if call.record.operands[call.num_scalars + k].revisit == "any"
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
            blocks.append(gather(source, step_read[k], layout))
        if schedule.tpu_buffers:
            # A core keeps its output block in VMEM only while consecutive programs
            # write the same block; a new block starts uninitialized.
            previous = list(previous)
            for k, fill in output_fills.items():
                if k in reread:
                    continue
                same = had_program & jnp.all(previous[k] == step_write[k], axis=-1)
                shape = (lanes,) + (1,) * (blocks[k].ndim - 1)
                blocks[k] = jnp.where(
                    same.reshape(shape), blocks[k], jnp.asarray(fill, blocks[k].dtype)
                )
                previous[k] = jnp.where(valid[:, None], step_write[k], previous[k])
            had_program = had_program | valid
        lane_starts = {k: step_write[k].reshape(*level_shape, -1) for k in tracked}
        stats_blocks = {
            k: {n: gather(stats[k][n], lane_starts[k], stats_layouts[k]) for n in instrument.STATS}
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
                updated[k] = write_in_order(
                    updated[k], step_write[k], flat_blocks, valid, layout, masks=masks
                )
            else:
                updated[k] = scatter(updated[k], step_write[k], flat_blocks, layout)
        new_stats = {
            k: {
                n: scatter(
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
        left = {
            k: new_blocks[k].reshape((lanes, *call.layouts[k].kernel_block_shape))
            for k in record_writes
        }
        return (updated, list(new_scratch), previous, had_program, new_stats), (ys, left)

    held = [
        gather(arrays[k], np.asarray(write_starts[k][0]).reshape(*level_shape, -1), call.layouts[k])
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
        # One step: its window starts stay known (NumPy), so blocks that tile an array
        # are that array reshaped, not gathered and scattered (`blocks.gather`).
        known: Any = xs  # traced starts (index maps that read scalar prefetch)
        if all(isinstance(r, np.ndarray) for r in (*read_starts, *write_starts)):
            known = (
                [np.asarray(p) for p in pid_xs],
                np.asarray(linear),
                [np.asarray(r, np.int32) for r in read_starts],
                [np.asarray(w, np.int32) for w in write_starts],
                np.asarray(schedule.valid),
            )
        state, (ys, left) = step(state, jax.tree_util.tree_map(lambda x: x[0], known))
        ys, left = jax.tree_util.tree_map(lambda y: y[None], (ys, left))
    else:
        state, (ys, left) = lax.scan(step, state, xs)
    final = list(state[0])
    for k, layout in enumerate(call.layouts):
        if stationary[k]:
            held_block: Any = final[k]
            blocks = held_block.reshape((lanes, *layout.kernel_block_shape))
            final[k] = scatter(
                arrays[k], jnp.asarray(write_starts[k][0], jnp.int32), blocks, layout
            )
    outputs = [
        unpad(final[k], call.layouts[k])
        for k in range(call.num_inputs, call.num_inputs + call.num_outputs)
    ]
    if not record_writes and (probe is None or not (probe.flags or probe.stats)):
        return outputs, None
    keep = np.flatnonzero(schedule.valid.reshape(-1))
    result = ProbeResult(
        programs=flat_pids[schedule.valid.reshape(-1)],
        stats={k: {n: unpad(v, call.layouts[k]) for n, v in state[4][k].items()} for k in tracked},
        writes={k: v.reshape(num_steps * lanes, *v.shape[2:])[keep] for k, v in left.items()},
    )
    if ys is not None:
        flags, low, high = (y.reshape(num_steps * lanes, *y.shape[2:])[keep] for y in ys)
        result = dataclasses.replace(result, flags=flags, low=low, high=high)
    return outputs, result


def _schedule(
    call: adapter.KernelCall, plan: Plan, request: Request, programs: np.ndarray | None
) -> tuple[Schedule, list[int], list[int]]:
    """The schedule to run, its batch levels, and each grid axis's level (-1: none).

    `programs` (a sample, one at a time) first; else the order `request` asks for
    (one level: the lanes of a wave); else the plan's (one level per batched axis).
    """
    grid = call.grid
    ndim_grid = len(grid)
    if programs is not None:
        chosen = np.asarray(programs, np.int64).reshape(-1, 1, ndim_grid)
        schedule = Schedule(chosen, np.ones(chosen.shape[:2], bool), ordered=False)
        return schedule, [1], [0] * ndim_grid
    if request.order:
        schedule = permuted_schedule(call.record, request.order, request.seed, request.lanes)
        return schedule, [schedule.valid.shape[1]], [0] * ndim_grid
    levels = [grid[a] for a in plan.batched]
    level_of = [plan.batched.index(a) if a in plan.batched else -1 for a in range(ndim_grid)]
    return grid_schedule(grid, plan), levels, level_of


def _window_starts(
    call: adapter.KernelCall,
    schedule: Schedule,
    levels: list[int],
    flat_pids: np.ndarray,
    scalars: Sequence[Any],
) -> tuple[list[Any], list[Any], list[tuple[int, ...]]]:
    """Window starts per step and lane (writes) and per step and level (reads).

    Also, per operand, the batch levels its blocks vary along (reads of an operand
    constant along a level are passed unbatched there).
    """
    num_steps, lanes = schedule.valid.shape
    level_shape = tuple(levels)
    write_starts: list[Any] = []
    read_starts: list[Any] = []
    deps: list[tuple[int, ...]] = []
    for k, layout in enumerate(call.layouts):
        ndim = len(layout.shape)
        flat = starts_of(call, k, flat_pids, scalars)
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
    return write_starts, read_starts, deps


def _program_ids(
    schedule: Schedule,
    levels: list[int],
    level_of: list[int],
    flat_pids: np.ndarray,
    grid: tuple[int, ...],
) -> tuple[list[np.ndarray], np.ndarray]:
    """Program ids per grid axis, per step and level; and each program's linear index."""
    num_steps, lanes = schedule.valid.shape
    level_shape = tuple(levels)
    ndim_grid = len(grid)
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
    return pid_xs, linear
