"""Races block by block under each backend's rules, and the outputs needing a closer look.

- GPU: every grid axis runs in parallel, so two programs writing the same output
  block race, whatever the axes.
- TPU: axes marked "parallel" may be split across cores; "arbitrary" axes (the
  default) run in order on one core. Programs that differ along a parallel axis and
  write the same block race. On arbitrary axes an output block stays in VMEM while
  consecutive programs write it, and is written back when the block changes: a block
  that is left and revisited later is not read back, so accumulating into it breaks
  (unless its BlockSpec asks for `pl.Buffered(..., revisit=pl.RevisitMode.ANY)`).

Outputs whose programs share memory (see `shared`) are decided element by element.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from pallaslab._src.geometry.blocks import program_starts
from pallaslab._src.geometry.limits import check_programs
from pallaslab._src.geometry.races.aliasing import aliased_reads
from pallaslab._src.geometry.races.conflict import BACKENDS, Conflict, conflict_at
from pallaslab._src.geometry.races.shared import (
    SharedAccesses,
    element_conflicts,
    shares_memory,
    whole_array,
)
from pallaslab._src.geometry.races.windows import (
    group_windows,
    is_aligned,
    overlapping_pairs,
    program_coordinates,
    window_sizes,
)
from pallaslab._src.records import Kernel, Operand

# Dimension semantics under which a TPU may run an axis's programs concurrently.
PARALLEL_SEMANTICS = frozenset({"parallel", "core_parallel", "subcore_parallel"})


def find_races(
    kernel: Kernel,
    backend: str = "gpu",
    prefetch: Sequence[np.ndarray] = (),
    shared: Mapping[int, SharedAccesses] | None = None,
) -> list[Conflict]:
    """The blocks of the kernel's outputs whose writers conflict under `backend`.

    Args:
        kernel: The kernel.
        backend: "gpu" (every grid axis parallel) or "tpu" (the kernel's dimension
            semantics; "arbitrary" when it gives none).
        prefetch: Scalar-prefetch values, needed when an output's index map reads them.
        shared: Per output position, the elements its programs store and touch (see
            `SharedAccesses`): under GPU rules those outputs are decided element by
            element, the others block by block.

    Returns:
        One `Conflict` per block (or per pair of overlapping element-indexed windows),
        in the order the grid first writes them; empty when the kernel is clean.

    Raises:
        ValueError: For an unknown backend, or an output whose index map cannot be
            evaluated here (it names the operand and why).
        GridTooLargeError: For grids of more than `limits.MAX_PROGRAMS` programs.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    check_programs(kernel.grid, "check for races")
    parallel = parallel_axes(kernel, backend)
    conflicts: list[Conflict] = []
    for operand in kernel.outputs:
        if shared and operand.position in shared and shares_memory(kernel, operand, backend):
            conflicts.extend(element_conflicts(kernel, operand, shared[operand.position]))
            continue
        starts = _output_starts(kernel, operand, prefetch)
        if starts is None:
            continue
        conflicts.extend(_operand_conflicts(kernel, operand, starts, backend, parallel))
    conflicts.extend(aliased_reads(kernel, backend, prefetch))
    return conflicts


def needs_elements(
    kernel: Kernel, backend: str = "gpu", prefetch: Sequence[np.ndarray] = ()
) -> tuple[int, ...]:
    """Outputs whose block-level conflicts under `backend` need an element-level look.

    Whole-array outputs (see `whole_array`) shared by programs that may run at once,
    in memory they share: whether they race depends on the elements each program
    stores. Decided element by element under GPU rules only (on TPU, blocks are copies
    and `pl.ANY` refs are written by DMAs, which are not followed). Outputs cut into
    blocks keep the block-level answer: programs sharing a block there accumulate
    into it.
    """
    if backend != "gpu":
        return ()
    found: list[int] = []
    for conflict in find_races(kernel, backend, prefetch):
        operand = next(o for o in kernel.operands if o.position == conflict.position)
        if (
            conflict.position not in found
            and whole_array(operand)
            and shares_memory(kernel, operand, backend)
        ):
            found.append(conflict.position)
    return tuple(found)


def parallel_axes(kernel: Kernel, backend: str) -> tuple[bool, ...]:
    """Per grid axis, whether the backend may run its programs concurrently."""
    if backend == "gpu":
        return (True,) * len(kernel.grid)
    semantics = kernel.dimension_semantics or ("arbitrary",) * len(kernel.grid)
    parallel = [s in PARALLEL_SEMANTICS for s in semantics]
    # Axes added by jax.vmap are independent kernel instances: they run in parallel.
    for axis in kernel.vmapped_dims:
        if axis < len(parallel):
            parallel[axis] = True
    return tuple(parallel[: len(kernel.grid)])


def _output_starts(
    kernel: Kernel, operand: Operand, prefetch: Sequence[np.ndarray]
) -> np.ndarray | None:
    index_map = operand.index_map
    if index_map is None:
        return None
    if not index_map.evaluable:
        raise ValueError(
            f"cannot check {operand.label}: its index map uses an operation pallaslab "
            f"cannot evaluate without JAX ({index_map.text})"
        )
    if index_map.uses_prefetch and not prefetch:
        raise ValueError(
            f"cannot check {operand.label}: its index map reads scalar-prefetch values; "
            "pass them as prefetch="
        )
    return program_starts(operand, kernel.grid, prefetch)


def _operand_conflicts(
    kernel: Kernel,
    operand: Operand,
    starts: np.ndarray,
    backend: str,
    parallel: tuple[bool, ...],
) -> list[Conflict]:
    coords = program_coordinates(kernel.grid)
    ids, unique = group_windows(starts)
    sizes = window_sizes(operand)
    found: list[Conflict] = []

    def make(kind: str, members: np.ndarray, window: int) -> Conflict:
        programs = coords[members]
        differ = tuple(int(a) for a in np.nonzero(np.ptp(programs, axis=0) > 0)[0])
        start = tuple(int(s) for s in unique[window])
        writers = tuple(tuple(int(c) for c in p) for p in programs)
        return conflict_at(backend, kind, operand, start, writers, differ)

    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(unique.shape[0] + 1))
    parallel_mask = np.asarray(parallel, dtype=bool)
    for window in range(unique.shape[0]):
        members = order[bounds[window] : bounds[window + 1]]
        if members.size < 2:
            continue
        spread = np.ptp(coords[members], axis=0) > 0 if coords.shape[1] else np.zeros(0, bool)
        if np.any(spread & parallel_mask):
            found.append(make("parallel-write", members, window))
        elif backend == "tpu" and np.any(np.diff(members) > 1) and operand.revisit != "any":
            # Visited in more than one run of consecutive programs (legal when the
            # BlockSpec asks for `pl.Buffered(..., revisit=pl.RevisitMode.ANY)`: the
            # pipeline then reads the block back).
            found.append(make("revisit", members, window))
    if not is_aligned(operand):
        pairs = overlapping_pairs(unique, sizes)
        for u, v in pairs if pairs is not None else ():
            members = np.sort(
                np.concatenate([order[bounds[u] : bounds[u + 1]], order[bounds[v] : bounds[v + 1]]])
            )
            spread = np.ptp(coords[members], axis=0) > 0
            if np.any(spread & parallel_mask):
                found.append(make("parallel-write", members, int(u)))
    return found
