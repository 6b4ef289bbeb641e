"""Schedules: the order in which the emulator runs a grid's programs, step by step."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from pallaslab._src.core.emulator.plans import Plan
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import Kernel


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
