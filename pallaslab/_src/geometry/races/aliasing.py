"""Inputs aliased to outputs (`input_output_aliases`) read after another program wrote them.

An aliased input and its output are one buffer in memory. A program that reads a block
of the input which another program has already written as the output reads that
program's result, or the original, depending on when the write reached memory: on a
TPU the pipeline copies input blocks in ahead of the program and output blocks back
after it, and on a GPU programs run at the same time. Pallas' interpreter (and the
emulator) read the input as it was before the kernel, so a test run in interpret mode
never sees the difference; Pallas' TPU interpreter, which models the buffer, does.

On a TPU the pipeline copies an input block in only when its block index differs from
the previous step's, and copies an output block back only when the next step's index
differs (or at the end): a program reads what the copy-in of the first step of its run
of equal input blocks fetched, and a program's write reaches memory after the last step
of its run of equal output blocks. A read is hazardous only when that copy-in comes
after that copy-back (a grid that keeps one aliased block in place reads it once).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pallaslab._src.geometry.blocks import program_starts
from pallaslab._src.geometry.races.conflict import Conflict, conflict_at
from pallaslab._src.geometry.races.windows import program_coordinates
from pallaslab._src.records import Kernel, Operand


def aliased_reads(
    kernel: Kernel, backend: str, prefetch: Sequence[np.ndarray] = ()
) -> list[Conflict]:
    """Blocks of aliased inputs a program reads after another program wrote them.

    Under TPU rules "after" is in grid order (one core runs the grid in order; a core
    of a parallel axis too), between the pipeline's copies: the copy-in that served the
    reader comes after the writer's copy-back; under GPU rules any other program may
    have run first.
    One `Conflict` (kind "aliased-read", on the input) per block, in grid order of its
    first read. Pairs whose blocks differ in shape, or whose index maps cannot be
    evaluated here, are left out.
    """
    found: list[Conflict] = []
    for in_index, out_index in kernel.input_output_aliases:
        source = _operand(kernel, "in", in_index)
        target = _operand(kernel, "out", out_index)
        if source is None or target is None or source.block_shape != target.block_shape:
            continue
        if source.position in kernel.unused:  # only its memory is passed along: never read
            continue
        if not (_evaluable(source, prefetch) and _evaluable(target, prefetch)):
            continue
        reads = program_starts(source, kernel.grid, prefetch)
        writes = program_starts(target, kernel.grid, prefetch)
        coords = program_coordinates(kernel.grid)
        fetched, written_back = _fetch_steps(reads), _write_back_steps(writes)
        seen: set[tuple[int, ...]] = set()
        for reader in range(reads.shape[0]):
            start = tuple(int(v) for v in reads[reader])
            if start in seen:
                continue
            writers = np.nonzero(np.all(writes == reads[reader], axis=1))[0]
            earlier = writers[writers != reader]
            if backend == "tpu":
                earlier = earlier[written_back[earlier] < fetched[reader]]
            if not earlier.size:
                continue
            seen.add(start)
            programs = (
                tuple(int(c) for c in coords[earlier[0]]),
                tuple(int(c) for c in coords[reader]),
            )
            axes = tuple(int(a) for a in np.nonzero(np.ptp(np.asarray(programs), axis=0))[0])
            found.append(conflict_at(backend, "aliased-read", source, start, programs, axes))
    return found


def _fetch_steps(starts: np.ndarray) -> np.ndarray:
    """Per step (grid order), the step whose copy-in it reads: the first of its run."""
    steps = np.arange(starts.shape[0])
    if not steps.size:
        return steps
    changes = np.ones(starts.shape[0], dtype=bool)
    changes[1:] = np.any(starts[1:] != starts[:-1], axis=1)
    return np.maximum.accumulate(np.where(changes, steps, 0))


def _write_back_steps(starts: np.ndarray) -> np.ndarray:
    """Per step (grid order), the step after which its block is copied back: its run's last."""
    reverse = starts[::-1]
    steps = np.arange(starts.shape[0])
    if not steps.size:
        return steps
    changes = np.ones(starts.shape[0], dtype=bool)
    changes[1:] = np.any(reverse[1:] != reverse[:-1], axis=1)
    last = np.maximum.accumulate(np.where(changes, steps, 0))
    written_back: np.ndarray = (starts.shape[0] - 1 - last)[::-1]
    return written_back


def _operand(kernel: Kernel, role: str, index: int) -> Operand | None:
    """The kernel's `index`-th input (scalar prefetch counted) or output."""
    listed = [o for o in kernel.operands if o.role == role]
    return listed[index] if 0 <= index < len(listed) else None


def _evaluable(operand: Operand, prefetch: Sequence[np.ndarray]) -> bool:
    index_map = operand.index_map
    if index_map is None or not index_map.evaluable:
        return False
    return not index_map.uses_prefetch or bool(prefetch)
