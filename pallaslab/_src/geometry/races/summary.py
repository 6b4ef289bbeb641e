"""Races in words for the inspector: what conflicts, why, and what to do instead."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pallaslab._src.geometry.blocks import program_starts
from pallaslab._src.geometry.races.conflict import (
    ELEMENT_KINDS,
    Conflict,
    axes_text,
    span_text,
    tuple_text,
)
from pallaslab._src.geometry.races.shared import SharedAccesses
from pallaslab._src.geometry.races.windows import is_aligned, sharing_axes, window_sizes
from pallaslab._src.records import Kernel


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
        along = axes_text(axes, names)
        programs = [tuple_text(p) for p in first.programs]
        example = (
            " and ".join(programs)
            if len(programs) <= 2
            else ", ".join(programs[:3]) + f" ({len(programs)} in all)"
        )
        if kind == "aliased-read":
            sentences.append(
                f"{label} hazard on {operand}: {first.describe(names)} Read each block "
                "of an aliased input before any program writes it (the same block in the "
                "same program), or do not alias it."
            )
            continue
        if kind == "revisit":
            sentences.append(
                f"{label} hazard on {operand}: {blocks} left and written again later "
                f"along {along} (e.g. programs {example} write block {tuple_text(first.block)}, "
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
            f"{along} (e.g. programs {example} both write block {tuple_text(first.block)}). "
            f"{fix}"
        )
    return sentences


def _element_sentence(
    label: str, operand: str, kind: str, group: Sequence[Conflict], names: Sequence[str]
) -> str:
    first = group[0]
    elements = sum(c.elements for c in group)
    pairs = f" ({len(group)} pairs of programs in all)" if len(group) > 1 else ""
    p, q = (tuple_text(x) for x in (*first.programs, first.programs[-1])[:2])
    along = axes_text(sorted({a for c in group for a in c.axes}), names)
    what = span_text(first.span)
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
        starts = program_starts(operand, kernel.grid)
        sharing = sharing_axes(starts, kernel.grid, window_sizes(operand), is_aligned(operand))
        revisited |= {a for a, s in enumerate(sharing) if s}
    if backend == "tpu" and revisited:
        along = axes_text(sorted(revisited), names)
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
