"""Outputs whose programs share memory on a GPU, and races there element by element.

On a GPU a block is a view of the array in global memory: programs that share one
(a whole-array ref, a `pl.ANY` ref) share its memory and write only the elements they
store. For such outputs block windows say too little; given the elements each
program stores and touches (`SharedAccesses`, computed by the core from a run of the
kernel's instrumented body), `element_conflicts` decides races element by element.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pallaslab._src.geometry.races.conflict import Conflict, conflict_at
from pallaslab._src.geometry.races.windows import program_coordinates
from pallaslab._src.records import Kernel, Operand

# Memory spaces of refs that are views of the arrays themselves, never copies.
SHARED_SPACES = frozenset({"any", "hbm", "gmem", "global"})


@dataclasses.dataclass(frozen=True, eq=False)
class SharedAccesses:
    """Which programs store and touch each element of an output they share.

    Computed by the core from a run of the kernel's instrumented body, in grid
    order, and handed here as plain arrays of the output's shape. Programs are
    numbered by their linear index in grid order (rows of `program_coordinates`);
    -1 where no program did.

    Attributes:
        position: The output's position among the kernel's operands.
        first_store: Per element, the first program that stored it (plainly).
        last_store: The last program that stored it.
        first_touch: The first program that loaded or stored it (plainly).
        last_touch: The last program that loaded or stored it.
        first_atomic: The first program that updated it atomically.
        last_atomic: The last program that did.
        programs: The programs run to find these (linear indices, sorted); all the
            grid's unless `sampled`.
        sampled: Whether only some programs were run (the grid was too large).
    """

    position: int
    first_store: np.ndarray
    last_store: np.ndarray
    first_touch: np.ndarray
    last_touch: np.ndarray
    first_atomic: np.ndarray
    last_atomic: np.ndarray
    programs: np.ndarray
    sampled: bool = False


def shares_memory(kernel: Kernel, operand: Operand, backend: str) -> bool:
    """Whether programs writing one block of `operand` write the same memory.

    Under GPU rules a block is a view of the array in global memory (Triton's refs
    are pointers), except Mosaic GPU's pipelined blocks, copied into shared memory
    and back. On TPU, blocks are copied into VMEM and written back whole; only refs
    left in HBM (`pl.ANY`) are the array itself.
    """
    space = operand.memory_space
    if backend == "gpu":
        return kernel.backend != "mosaic_gpu" or space in SHARED_SPACES
    return space in SHARED_SPACES


def whole_array(operand: Operand) -> bool:
    """Whether the operand's ref is the whole array: no BlockSpec, or `pl.ANY` / HBM.

    Programs then pick their part with `pl.program_id`, `pl.ds` and masks (the
    Triton style), and all share the one block. Squeezed dimensions only pick which
    whole array: those `jax.vmap` adds (each instance of the kernel has its own), or
    a row per program (`BlockSpec((None, n), ...)`).
    """
    if operand.memory_space in SHARED_SPACES:
        return True
    kept = [
        (int(b), n)
        for b, n in zip(operand.block_shape, operand.shape, strict=True)
        if b is not None
    ]
    return all(b == n for b, n in kept)


def element_conflicts(
    kernel: Kernel, operand: Operand, shared: SharedAccesses, backend: str = "gpu"
) -> list[Conflict]:
    """GPU conflicts on an output whose programs share its memory, element by element.

    Two different programs storing one element race; so do a program loading an
    element another stores, and plain accesses to an element others update
    atomically. Elements are grouped by the pair of programs involved (the first and
    the last, in grid order): one `Conflict` per (kind, pair), in order of their first
    element.
    """
    stores = shared.last_store >= 0
    store_store = stores & (shared.first_store != shared.last_store)
    store_read = stores & ~store_store & (shared.first_touch != shared.last_touch)
    atomic = shared.last_atomic >= 0
    plain = shared.last_touch >= 0
    lowest = np.where(
        plain, np.minimum(shared.first_touch, shared.first_atomic), shared.first_atomic
    )
    highest = np.maximum(shared.last_touch, shared.last_atomic)
    atomic_mixed = atomic & plain & ~store_store & ~store_read & (lowest != highest)
    other = np.where(
        shared.first_touch != shared.first_store, shared.first_touch, shared.last_touch
    )
    kinds = (
        ("element-store", store_store, shared.first_store, shared.last_store),
        ("element-read", store_read, shared.first_store, other),
        ("element-atomic", atomic_mixed, lowest, highest),
    )
    coords = program_coordinates(kernel.grid)
    shape = shared.first_store.shape
    found: list[tuple[int, Conflict]] = []
    for kind, mask, first, second in kinds:
        flat = np.flatnonzero(mask)
        if not flat.size:
            continue
        pairs = np.stack([first.reshape(-1)[flat], second.reshape(-1)[flat]], axis=-1)
        unique, inverse = np.unique(pairs, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        for group, (p, q) in enumerate(unique):
            members = flat[inverse == group]
            where = np.stack(np.unravel_index(members, shape), axis=-1) if shape else None
            start = tuple(int(v) for v in where[0]) if where is not None else ()
            span = (
                tuple((int(lo), int(hi)) for lo, hi in zip(where.min(0), where.max(0), strict=True))
                if where is not None
                else ()
            )
            programs = (tuple(int(c) for c in coords[p]), tuple(int(c) for c in coords[q]))
            differ = tuple(int(a) for a in np.nonzero(coords[p] != coords[q])[0])
            conflict = conflict_at(
                backend,
                kind,
                operand,
                start,
                programs,
                differ,
                elements=int(members.size),
                span=span,
            )
            found.append((int(members[0]), conflict))
    found.sort(key=lambda item: item[0])
    return [c for _, c in found]
