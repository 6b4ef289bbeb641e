"""Which programs of a grid touch the same block, and when that is a race.

Pure geometry over evaluated index maps: no JAX. The emulator uses `sharing_axes` to
decide which grid axes it may run as one batch; `find_races` applies each backend's
rules to the same facts:

- GPU: every grid axis runs in parallel, so two programs writing the same output
  block race, whatever the axes.
- TPU: axes marked "parallel" may be split across cores; "arbitrary" axes (the
  default) run in order on one core. Programs that differ along a parallel axis and
  write the same block race. On arbitrary axes an output block stays in VMEM while
  consecutive programs write it, and is written back when the block changes: a block
  that is left and revisited later is not read back, so accumulating into it breaks.

On a GPU a block is a view of the array in global memory: programs that share one
(a whole-array ref, a `pl.ANY` ref) share its memory and write only the elements they
store. For such outputs block windows say too little; given the elements each
program stores and touches (`SharedAccesses`, computed by the core from a run of the
kernel's instrumented body), `find_races` decides GPU races element by element.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from pallaslab._src.geometry.blocks import block_starts
from pallaslab._src.geometry.limits import check_programs
from pallaslab._src.records import Kernel, Operand

Backend = Literal["gpu", "tpu"]
BACKENDS: tuple[Backend, ...] = ("gpu", "tpu")
# Conflicts found element by element, between programs sharing an output's memory.
ELEMENT_KINDS = frozenset({"element-store", "element-read", "element-atomic"})
# Memory spaces of refs that are views of the arrays themselves, never copies.
SHARED_SPACES = frozenset({"any", "hbm", "gmem", "global"})
# Dimension semantics under which a TPU may run an axis's programs concurrently.
PARALLEL_SEMANTICS = frozenset({"parallel", "core_parallel", "subcore_parallel"})
# Per operand, at most this many distinct windows are compared pairwise when windows
# may overlap without coinciding (element-indexed dimensions); beyond it, conservative.
_PAIRWISE_LIMIT = 2048


def window_sizes(operand: Operand) -> tuple[int, ...]:
    """Elements the operand's block spans per dimension (squeezed dimensions span 1)."""
    return tuple(1 if b is None else int(b) for b in operand.block_shape)


def is_aligned(operand: Operand) -> bool:
    """Whether every block sits on the operand's block grid.

    Blocks then either coincide or are disjoint: true unless a dimension is
    element-indexed.
    """
    return all(k in ("blocked", "squeezed") for k in operand.block_kinds)


def program_coordinates(grid: Sequence[int]) -> np.ndarray:
    """Every program's grid indices, shape (programs, axes), in grid order.

    Grid order is the order the grid runs sequentially: the last axis fastest.
    """
    if not grid:
        return np.zeros((1, 0), np.int64)
    check_programs(grid, "enumerate one by one")
    return np.indices(tuple(grid), dtype=np.int64).reshape(len(grid), -1).T


def group_windows(starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups programs by the window they touch.

    Args:
        starts: (programs, dims) first element of each program's window.

    Returns:
        (ids, unique): `ids[p]` numbers program p's window; `unique[ids[p]]` is its
        start. Windows are numbered in order of first use.
    """
    if starts.shape[1] == 0:
        return np.zeros(starts.shape[0], np.int64), np.zeros((1, 0), np.int64)
    unique, first, inverse = np.unique(starts, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    renumber = np.empty_like(order)
    renumber[order] = np.arange(order.size)
    return renumber[inverse.reshape(-1)], unique[order]


def overlapping_pairs(unique: np.ndarray, sizes: Sequence[int]) -> np.ndarray | None:
    """Pairs (u, v), u < v, of distinct windows that share elements.

    None when there are too many windows to compare.
    """
    count = unique.shape[0]
    if count > _PAIRWISE_LIMIT:
        return None
    extent = np.asarray(sizes, dtype=np.int64)
    gap = np.abs(unique[:, None, :] - unique[None, :, :])
    overlap = np.all(gap < extent, axis=-1)
    u, v = np.nonzero(np.triu(overlap, k=1))
    return np.stack([u, v], axis=-1)


def sharing_axes(
    starts: np.ndarray, grid: Sequence[int], sizes: Sequence[int], aligned: bool
) -> tuple[bool, ...]:
    """For each grid axis, whether two programs that differ along it touch one element.

    An axis that shares nothing can run as one batch: its programs' windows are
    disjoint. Element-indexed windows that may overlap are compared pairwise up to a
    limit, and assumed to share beyond it.

    Args:
        starts: (programs, dims) window starts, programs in `program_coordinates` order.
        grid: The grid.
        sizes: Window extent per dimension.
        aligned: Whether windows either coincide or are disjoint (no partial overlap).
    """
    coords = program_coordinates(grid)
    ids, unique = group_windows(starts)
    count = unique.shape[0]
    shared = []
    pairs = None if aligned else overlapping_pairs(unique, sizes)
    for axis in range(len(grid)):
        lo = np.full(count, np.iinfo(np.int64).max)
        hi = np.full(count, np.iinfo(np.int64).min)
        np.minimum.at(lo, ids, coords[:, axis])
        np.maximum.at(hi, ids, coords[:, axis])
        along = bool(np.any(lo != hi))
        if not along and not aligned:
            if pairs is None:
                along = bool(np.unique(coords[:, axis]).size > 1)
            elif pairs.size:
                u, v = pairs[:, 0], pairs[:, 1]
                along = bool(np.any((lo[u] != lo[v]) | (lo[u] != hi[u]) | (lo[v] != hi[v])))
        shared.append(along)
    return tuple(shared)


@dataclasses.dataclass(frozen=True)
class Conflict:
    """Programs that touch the same block of an output where the backend forbids it.

    Attributes:
        backend: "gpu" or "tpu": whose rules this breaks.
        kind: "parallel-write" (programs that may run at the same time write the
            block) or "revisit" (TPU: the block is left and written again later).
        operand: The output's label (its kernel parameter name).
        position: The output's position among the kernel's operands.
        block: The block's index in the output's block grid (element offsets along
            element-indexed dimensions).
        start: The block's first element, per dimension.
        programs: The programs that write it, in grid order.
        axes: The grid axes along which those programs differ.
        elements: For element-level conflicts ("element-store": two programs store
            the same elements; "element-read": a program loads elements another
            stores; "element-atomic": elements updated atomically are also loaded
            or stored plainly by another program), how many elements; 0 for blocks.
        span: For element-level conflicts, per dimension the first and last
            element involved; `start` is the first of them, `block` its block.
    """

    backend: str
    kind: str
    operand: str
    position: int
    block: tuple[int, ...]
    start: tuple[int, ...]
    programs: tuple[tuple[int, ...], ...]
    axes: tuple[int, ...]
    elements: int = 0
    span: tuple[tuple[int, int], ...] = ()

    @property
    def element_level(self) -> bool:
        """Whether this conflict was found element by element (shared memory)."""
        return self.kind in ELEMENT_KINDS

    def describe(self, axis_names: Sequence[str] = ()) -> str:
        """One sentence naming the block, its programs and why they conflict."""
        shown = ", ".join(_tuple(p) for p in self.programs[:4])
        more = f" and {len(self.programs) - 4} more" if len(self.programs) > 4 else ""
        axes = _axes_text(self.axes, axis_names)
        if self.element_level:
            first, second = (_tuple(p) for p in (*self.programs, self.programs[-1])[:2])
            what = f"{_span_text(self.span)} of {self.operand} ({self.elements} element(s))"
            verb = {
                "element-store": f"are stored by both programs {first} and {second}",
                "element-read": f"are stored by program {first} and read by program {second}",
                "element-atomic": (
                    f"are updated atomically and also loaded or stored plainly by programs "
                    f"{first} and {second}"
                ),
            }[self.kind]
            return (
                f"{what} {verb}, which may run at the same time on "
                f"{self.backend.upper()} (they differ along {axes})."
            )
        where = f"block {_tuple(self.block)} of {self.operand}"
        if self.kind == "revisit":
            return (
                f"{where} is left and written again later by programs {shown}{more} "
                f"(along {axes}); a TPU writes an output block back when the next "
                "program's block differs and does not read it back on return."
            )
        return (
            f"{where} is written by {len(self.programs)} programs that may run at the "
            f"same time on {self.backend.upper()}: {shown}{more} (they differ along {axes})."
        )


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
    return conflicts


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
    Triton style), and all share the one block.
    """
    if operand.memory_space in SHARED_SPACES:
        return True
    return all(
        b is not None and int(b) == n
        for b, n in zip(operand.block_shape, operand.shape, strict=True)
    )


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
            conflict = Conflict(
                backend=backend,
                kind=kind,
                operand=operand.label,
                position=operand.position,
                block=_element_block(operand, start),
                start=start,
                programs=programs,
                axes=differ,
                elements=int(members.size),
                span=span,
            )
            found.append((int(members[0]), conflict))
    found.sort(key=lambda item: item[0])
    return [c for _, c in found]


def _element_block(operand: Operand, element: tuple[int, ...]) -> tuple[int, ...]:
    """The block (index in the block grid) holding an element."""
    return tuple(
        e // b if kind == "blocked" and b else e
        for e, b, kind in zip(element, window_sizes(operand), operand.block_kinds, strict=True)
    )


def _span_text(span: Sequence[tuple[int, int]]) -> str:
    if not span:
        return "the element"
    parts = [str(lo) if lo == hi else f"{lo}..{hi}" for lo, hi in span]
    if len(parts) == 1:
        return f"element{'s' if '..' in parts[0] else ''} {parts[0]}"
    return "elements [" + ", ".join(parts) + "]"


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
    starts = block_starts(operand, kernel.grid, prefetch)
    return starts.reshape(-1, len(operand.shape))


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
        return Conflict(
            backend=backend,
            kind=kind,
            operand=operand.label,
            position=operand.position,
            block=_block_index(operand, start),
            start=start,
            programs=tuple(tuple(int(c) for c in p) for p in programs),
            axes=differ,
        )

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
        elif backend == "tpu" and np.any(np.diff(members) > 1):
            # Visited in more than one run of consecutive programs.
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


def _block_index(operand: Operand, start: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(
        s // b if kind == "blocked" and b else s
        for s, b, kind in zip(start, operand.block_shape, operand.block_kinds, strict=True)
    )


def axis_names(kernel: Kernel) -> tuple[str, ...]:
    """Readable names for the grid axes.

    The grid's names, else the index maps' parameter names when they agree, else
    "axis k".
    """
    if kernel.grid_names and len(kernel.grid_names) == len(kernel.grid):
        return tuple(str(n) for n in kernel.grid_names)
    names: list[str] | None = None
    for operand in kernel.operands:
        index_map = operand.index_map
        if index_map is None or index_map.num_grid_args != len(kernel.grid):
            continue
        if index_map.default:
            continue  # JAX's own map for a ref without a BlockSpec: its names say nothing
        candidate = list(index_map.arg_names[: len(kernel.grid)])
        if names is None:
            names = candidate
        elif names != candidate:
            names = None
            break
    if names and all(n.isidentifier() for n in names):
        return tuple(names)
    return tuple(f"axis {k}" for k in range(len(kernel.grid)))


def _axes_text(axes: Sequence[int], names: Sequence[str]) -> str:
    parts = []
    for axis in axes:
        name = names[axis] if axis < len(names) else ""
        parts.append(
            f"grid axis {axis}" + (f" ({name})" if name and name != f"axis {axis}" else "")
        )
    if not parts:
        return "no axis"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _tuple(values: Sequence[int]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def summarize(
    kernel: Kernel,
    conflicts: Sequence[Conflict],
    backend: str,
    shared: Mapping[int, SharedAccesses] | None = None,
) -> list[str]:
    """Sentences for the inspector: what conflicts, why, and what to do instead.

    One sentence per (operand, kind), with the first block as an example; a single
    sentence saying so when the kernel is clean. `shared` are the element-level
    accesses `find_races` was given, if any.
    """
    names = axis_names(kernel)
    label = backend.upper()
    if not conflicts:
        return [_clean_sentence(kernel, backend, names, shared)]
    sentences = []
    groups: dict[tuple[str, str], list[Conflict]] = {}
    for conflict in conflicts:
        groups.setdefault((conflict.operand, conflict.kind), []).append(conflict)
    for (operand, kind), group in groups.items():
        if kind in ELEMENT_KINDS:
            sentences.append(_element_sentence(label, operand, kind, group, names))
            continue
        axes = sorted({a for c in group for a in c.axes})
        first = group[0]
        total = _block_count(kernel, first.position)
        if total and len(group) == total:
            blocks = f"each of its {total} blocks is"
        elif total:
            blocks = f"{len(group)} of its {total} blocks are"
        else:
            blocks = f"{len(group)} of its blocks are"
        sizes = {len(c.programs) for c in group}
        writers = f"{sizes.pop()} programs" if len(sizes) == 1 else "several programs"
        along = _axes_text(axes, names)
        programs = [_tuple(p) for p in first.programs]
        example = (
            " and ".join(programs)
            if len(programs) <= 2
            else ", ".join(programs[:3]) + f" ({len(programs)} in all)"
        )
        if kind == "revisit":
            sentences.append(
                f"{label} hazard on {operand}: {blocks} left and written again later "
                f"along {along} (e.g. programs {example} write block {_tuple(first.block)}, "
                "with other blocks in between). A TPU writes an output block back when the "
                "next program's block differs and does not read it back on return: keep "
                "the axis a block accumulates along innermost in the grid."
            )
            continue
        if backend == "gpu":
            fix = (
                "On GPU every grid axis runs in parallel, so these writes race: "
                "accumulating into an output across programs needs atomics (e.g. "
                f"pl.atomic_add) or a grid without {along} (loop over it inside the "
                "kernel, e.g. with lax.fori_loop)."
            )
        else:
            fix = (
                "On TPU, 'parallel' axes may be split across cores, so these writes race: "
                f'mark {along} "arbitrary" in dimension_semantics.'
            )
        sentences.append(
            f"{label} race on {operand}: {blocks} written by {writers} that differ along "
            f"{along} (e.g. programs {example} both write block {_tuple(first.block)}). "
            f"{fix}"
        )
    return sentences


def _element_sentence(
    label: str, operand: str, kind: str, group: Sequence[Conflict], names: Sequence[str]
) -> str:
    first = group[0]
    elements = sum(c.elements for c in group)
    pairs = f" ({len(group)} pairs of programs in all)" if len(group) > 1 else ""
    p, q = (_tuple(x) for x in (*first.programs, first.programs[-1])[:2])
    along = _axes_text(sorted({a for c in group for a in c.axes}), names)
    what = _span_text(first.span)
    shared = (
        f"Programs that share {operand} (a whole-array or pl.ANY ref) share its memory "
        f"and run at the same time on {label}"
    )
    if kind == "element-store":
        return (
            f"{label} race on {operand}: {elements} element(s) are stored by two programs "
            f"that differ along {along} (e.g. programs {p} and {q} both store {what}"
            f"){pairs}. {shared}: each must store its own elements (check the pl.ds "
            "offsets and the masks), or combine them with atomics (pl.atomic_add)."
        )
    if kind == "element-read":
        return (
            f"{label} race on {operand}: programs load {elements} element(s) that other "
            f"programs store (e.g. program {q} loads {what}, which program {p} stores)"
            f"{pairs}. {shared}, so what is loaded depends on timing: read only what the "
            "program itself stored, or split the work into two kernels."
        )
    return (
        f"{label} race on {operand}: {elements} element(s) updated atomically are also "
        f"loaded or stored plainly by another program (e.g. programs {p} and {q}, "
        f"{what}){pairs}. Atomics only order atomic updates: make every access to "
        "those elements atomic, or split the work into two kernels."
    )


def _clean_sentence(
    kernel: Kernel,
    backend: str,
    names: Sequence[str],
    shared: Mapping[int, SharedAccesses] | None = None,
) -> str:
    label = backend.upper()
    checked = [
        (o, shared[o.position])
        for o in kernel.outputs
        if backend == "gpu" and shared and o.position in shared
    ]
    if checked:
        refs = " and ".join(o.label for o, _ in checked)
        sampled = [a for _, a in checked if a.sampled]
        how = (
            f" (checked element by element over {sampled[0].programs.size} of "
            f"{kernel.num_programs} programs)"
            if sampled
            else f" (checked element by element over all {kernel.num_programs} programs)"
        )
        return (
            f"{label}: no races: programs share {refs}, but no two store the same element "
            f"and none loads what another stores{how}."
        )
    revisited = set()
    for operand in kernel.outputs:
        index_map = operand.index_map
        if index_map is None or not index_map.evaluable or index_map.uses_prefetch:
            continue
        starts = block_starts(operand, kernel.grid).reshape(-1, len(operand.shape))
        sharing = sharing_axes(starts, kernel.grid, window_sizes(operand), is_aligned(operand))
        revisited |= {a for a, s in enumerate(sharing) if s}
    if backend == "tpu" and revisited:
        along = _axes_text(sorted(revisited), names)
        semantics = (
            ""
            if kernel.dimension_semantics
            else ' (no dimension_semantics: every axis is "arbitrary")'
        )
        return (
            f"{label}: no races. Output blocks are revisited only along {along}, which "
            f"runs in order{semantics}, by consecutive programs, so each block stays in "
            "VMEM while it accumulates."
        )
    return f"{label}: no races: no two programs write the same output block."


def _block_count(kernel: Kernel, position: int) -> int:
    operand = next((o for o in kernel.operands if o.position == position), None)
    if operand is None or not is_aligned(operand):
        return 0
    return math.prod(
        -(-dim // size) for dim, size in zip(operand.shape, window_sizes(operand), strict=True)
    )
