"""Leaks: output tiles that depend on padding, never-written memory or masked-out lanes.

`find_leaks` fills edge-block padding, outputs and scratch buffers first as Pallas'
interpreter does (NaN, or the smallest integer) and then with an ordinary value;
output tiles that change depend on memory no program should read. The lanes masked
loads without `other=` turn off (undefined on a GPU) are varied the same way. Each
source is then varied alone to say which one leaks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import compile_cache, emulator, sharing
from pallaslab._src.core.checking.outputs import differs, is_inexact, ref_label, tiles_of
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import Leak, SourceLocation


def _sources(call: adapter.KernelCall) -> list[tuple[int, str, str]]:
    """(operand position, cause, label) of every buffer whose filler could leak.

    The body's dataflow rules out most: an output block the body overwrites before
    reading, with every element covered by some block, cannot leak its initial
    contents; scratch the body writes before reading cannot either.
    """
    record = call.record
    body = call.program
    sources = []
    for k, layout in enumerate(call.layouts):
        position = call.num_scalars + k
        label = record.operands[position].label
        if k < call.num_inputs:
            if layout.padded_shape != layout.shape:
                sources.append((position, "padding", label))
            continue
        if (k - call.num_inputs) in call.aliases:
            continue
        covered = _written_mask(call, k)
        if (
            not body.written[k]
            or body.reads_initial_block[k]
            or covered is None
            or not covered.all()
        ):
            sources.append((position, "uninitialized-output", label))
    if body.scratch_carries:
        first_scratch = call.num_scalars + len(call.layouts)
        for j in range(len(call.scratch)):
            position = first_scratch + j
            sources.append((position, "uninitialized-scratch", record.operands[position].label))
    return sources


def find_leaks(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    *,
    kernel_index: int = 0,
) -> list[Leak]:
    """Output tiles of one kernel that depend on padding or never-written memory.

    All variants (Pallas' fill; every source filled otherwise; each source alone when
    there are several) run in one compiled program, vmapped over the fill values.

    Args:
        call: The kernel, as the emulator reads it.
        plan: Its plan (must be emulated).
        operands: The values it receives (scalar prefetch, then inputs).
        kernel_index: Its index in the program, for the records.

    Returns:
        One `Leak` per (source, output) that leaks, empty when none does.
    """
    return leaks_and_outputs(call, plan, operands, kernel_index=kernel_index)[0]


def leaks_and_outputs(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    *,
    kernel_index: int = 0,
) -> tuple[list[Leak], list[np.ndarray] | None]:
    """`find_leaks`, and the kernel's outputs as the emulator gives them (Pallas' fills).

    The outputs are the check's own first variant (None when there was nothing that
    could leak, so nothing ran): what `pytest --pallaslab` compares with the test's.
    """
    if plan.fallback:
        return [], None
    try:
        return _find_leaks(call, plan, operands, kernel_index, _masked_loads(call))
    except instrument.UnsupportedError:  # loads not followed: the other sources still are
        return _find_leaks(call, plan, operands, kernel_index, [])


def _find_leaks(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    kernel_index: int,
    loads: list[instrument.AccessSite],
) -> tuple[list[Leak], list[np.ndarray] | None]:
    sources = [
        *((position, cause, label, None) for position, cause, label in _sources(call)),
        *(
            (site.ref, "masked-load-without-other", ref_label(call, site.ref), site)
            for site in loads
        ),
    ]
    if not sources:
        return [], None
    dtypes = _operand_dtypes(call)
    # Variant 0: Pallas' fills; 1: every source varied; then each source alone.
    names = [_source_name(position, site) for position, _, _, site in sources]
    chosen: list[set[str]] = [set(), set(names)]
    if len(sources) > 1:
        chosen += [{name} for name in names]
    table = {
        name: np.stack(
            [
                emulator.fill_value(
                    dtypes.get(position, np.float32), "alt" if name in variant else ""
                )
                for variant in chosen
            ]
        )
        for name, (position, _, _, _) in zip(names, sources, strict=True)
    }
    switches = {
        _source_name(site.ref, site): np.array([_source_name(site.ref, site) in v for v in chosen])
        for site in loads
    }
    probe = instrument.Probe(fills=tuple(site.index for site in loads)) if loads else None

    def run(args: Sequence[Any], fills: dict[str, Any], on: dict[str, Any]) -> list[Any]:
        operand_fills = {int(n): v for n, v in fills.items() if not n.startswith("load")}
        load_fills = [(on[_source_name(s.ref, s)], fills[_source_name(s.ref, s)]) for s in loads]
        outputs, _ = emulator.run_probed(
            call, plan, args, emulator.EMULATE, operand_fills, probe=probe, probe_fills=load_fills
        )
        return outputs

    args = (list(operands), table, switches)
    what = (
        "leaks",
        emulator.check_key(call, plan),
        tuple(names),
        tuple(tuple(sorted(v)) for v in chosen),
    )
    batched = compile_cache.compile_keyed(what, jax.vmap(run, in_axes=(None, 0, 0)), args)(*args)
    results = [[np.asarray(o[v]) for o in batched] for v in range(len(chosen))]
    base, varied = results[0], results[1]
    if not any(differs(a, b).any() for a, b in zip(base, varied, strict=True)):
        return [], base
    per_source = [varied] if len(sources) == 1 else results[2:]
    leaks = []
    for (position, cause, label, site), outputs in zip(sources, per_source, strict=True):
        for m, (want, got) in enumerate(zip(base, outputs, strict=True)):
            mask = differs(want, got)
            if not mask.any():
                continue
            stored = None
            if cause == "uninitialized-output":
                stored = _stored_elements(call, plan, operands, position)
            found = _leak_records(
                call,
                kernel_index,
                position,
                cause,
                label,
                m,
                mask,
                want,
                stored=stored,
                prefetch=operands[: call.num_scalars],
            )
            if site is not None:
                found = [_at_load(leak, site) for leak in found]
            leaks.extend(found)
    return leaks, base


def _masked_loads(call: adapter.KernelCall) -> list[instrument.AccessSite]:
    """Masked loads without `other=` from a kernel operand (their lanes can leak)."""
    body = call.instrumented
    if body is None:
        return []
    return [
        site
        for site in body.sites
        if site.kind == "load" and site.masked and not site.other and site.ref >= 0
    ]


def _source_name(position: int, site: instrument.AccessSite | None) -> str:
    return f"load{site.index}" if site is not None else str(position)


def _at_load(leak: Leak, site: instrument.AccessSite) -> Leak:
    """A leak through a masked load's lanes, located at the load."""
    location = SourceLocation(site.file, site.line) if site.file else leak.location
    detail = (
        f"The masked load from {leak.source} has no other=: the lanes its mask turns off "
        "hold whatever memory holds (NaN past the end in Pallas' interpreter, anything on "
        f"a GPU), and they reach {leak.output}. Give the load other= (e.g. other=0.0), or "
        "keep those lanes out of the result with jnp.where."
    )
    return dataclasses.replace(leak, location=location, detail=detail)


def _operand_dtypes(call: adapter.KernelCall) -> dict[int, Any]:
    dtypes: dict[int, Any] = {
        call.num_scalars + k: layout.dtype for k, layout in enumerate(call.layouts)
    }
    first_scratch = call.num_scalars + len(call.layouts)
    for j, (_, dtype) in enumerate(call.scratch):
        dtypes[first_scratch + j] = dtype
    return dtypes


def _leak_records(  # noqa: PLR0917 - one leak's facts, all needed
    call: adapter.KernelCall,
    kernel_index: int,
    position: int,
    cause: str,
    label: str,
    output: int,
    mask: np.ndarray,
    values: np.ndarray,
    *,
    stored: np.ndarray | None = None,
    prefetch: Sequence[Any] = (),
) -> list[Leak]:
    record = call.record
    k = call.num_inputs + output
    layout = call.layouts[k]
    out_operand = record.operands[call.num_scalars + k]
    prefetch = [np.asarray(v) for v in prefetch]
    covered = _written_mask(call, k, prefetch)
    written = stored if stored is not None else covered
    found = []
    groups: list[tuple[str, np.ndarray]] = [(cause, mask)]
    if cause == "uninitialized-output" and written is not None:
        # Elements no program writes keep their initial contents: say so apart.
        groups = [("never-written", mask & ~written), (cause, mask & written)]
    # Never-written elements that some program's block covers: the kernel leaves part
    # of its block unstored (not a grid or index map that misses them).
    in_blocks = covered is not None and stored is not None
    for kind, part in groups:
        if not part.any():
            continue
        tiles = tiles_of(part, layout)
        nan = int(np.isnan(values[part]).sum()) if is_inexact(values.dtype) else 0
        found.append(
            Leak(
                kernel=record.name,
                kernel_index=kernel_index,
                output=out_operand.label,
                source=label,
                cause=kind,
                tiles=tuple(tiles),
                elements=int(part.sum()),
                nan_elements=nan,
                location=_location(call, position, kind, in_blocks=in_blocks),
                programs=_writers(call, k, tiles[:4], prefetch),
                detail=_detail(
                    call,
                    position,
                    kind,
                    in_blocks=in_blocks and covered is not None and not (part & ~covered).any(),
                    coverage_known=covered is not None,
                ),
            )
        )
    return found


def _stored_elements(
    call: adapter.KernelCall, plan: emulator.Plan, operands: Sequence[Any], position: int
) -> np.ndarray | None:
    """The elements of an output some program stores (None when not known).

    Blocks say which elements some program's block covers, not which a program
    stores: a kernel that sets one element of its block (an SMEM output of which it
    writes element 0) leaves the rest as the buffer held them. The instrumented body
    says which elements were stored.
    """
    operand = call.record.operands[position]
    k = position - call.num_scalars
    if operand.role != "out" or not call.program.written[k] or call.instrumented is None:
        return None  # none that stores: the block-level words say more
    try:
        accesses = sharing.shared_accesses(call, plan, operands, [position])[position]
    except instrument.UnsupportedError:  # a body it does not follow: blocks say it
        return None
    if accesses.sampled:
        return None
    return np.asarray((accesses.last_store >= 0) | (accesses.last_atomic >= 0))


def _written_mask(
    call: adapter.KernelCall, k: int, prefetch: Sequence[np.ndarray] = ()
) -> np.ndarray | None:
    """Elements of output `k` some program's block covers (None if unknown).

    An index map that reads scalar prefetch is evaluated with the run's `prefetch`.
    """
    operand = call.record.operands[call.num_scalars + k]
    index_map = operand.index_map
    if index_map is None or not index_map.evaluable:
        return None
    if index_map.uses_prefetch and (not call.num_scalars or len(prefetch) < call.num_scalars):
        return None
    layout = call.layouts[k]
    covered = np.zeros(layout.padded_shape, bool)
    for start in np.unique(emulator.clamped_starts(call, k, prefetch), axis=0):
        window = tuple(slice(int(s), int(s) + b) for s, b in zip(start, layout.block, strict=True))
        covered[window] = True
    lows = [lo for lo, _ in layout.padding]
    inside = tuple(slice(lo, lo + d) for lo, d in zip(lows, layout.shape, strict=True))
    return covered[inside]


def _writers(
    call: adapter.KernelCall,
    k: int,
    tiles: Sequence[tuple[int, ...]],
    prefetch: Sequence[np.ndarray] = (),
) -> tuple[tuple[int, ...], ...]:
    operand = call.record.operands[call.num_scalars + k]
    if operand.index_map is None or not operand.index_map.evaluable:
        return ()
    if operand.index_map.uses_prefetch and (
        not call.num_scalars or len(prefetch) < call.num_scalars
    ):
        return ()
    layout = call.layouts[k]
    starts = emulator.clamped_starts(call, k, prefetch)
    coords = geometry.program_coordinates(call.grid)
    block = np.asarray(layout.block)
    found: list[tuple[int, ...]] = []
    for tile in tiles:
        origin = np.asarray(tile) * block
        hits = np.nonzero(np.all((starts <= origin) & (origin < starts + block), axis=1))[0]
        found.extend(tuple(int(c) for c in coords[h]) for h in hits[:2])
    return tuple(dict.fromkeys(found))


def _location(
    call: adapter.KernelCall, position: int, cause: str, *, in_blocks: bool = False
) -> SourceLocation | None:
    """Where to look for a leak's cause.

    The BlockSpec for padding and uncovered elements; the store that leaves part of a
    block unwritten; the load that reads memory before anything wrote it.
    """
    record = call.record
    operand = record.operands[position]
    if cause == "never-written" and in_blocks:
        return _first_access(call, position, ("store", "update", "atomic")) or record.source
    if cause in ("padding", "never-written"):
        index_map = operand.index_map  # JAX's default map has no source: no BlockSpec
        if index_map is not None and index_map.source_file:
            return SourceLocation(index_map.source_file, index_map.source_line)
    if cause in ("uninitialized-output", "uninitialized-scratch"):
        return _first_access(call, position, ("load", "update")) or record.source
    return record.source


def _first_access(
    call: adapter.KernelCall, position: int, kinds: tuple[str, ...]
) -> SourceLocation | None:
    """The source line of the body's first access of these kinds to an operand."""
    body = call.instrumented
    for site in body.sites if body is not None else ():
        if site.ref == position and site.kind in kinds and site.file:
            return SourceLocation(site.file, site.line)
    return None


def _detail(
    call: adapter.KernelCall,
    position: int,
    cause: str,
    *,
    in_blocks: bool = False,
    coverage_known: bool = True,
) -> str:
    record = call.record
    operand = record.operands[position]
    if cause == "padding":
        k = position - call.num_scalars
        layout = call.layouts[k]
        parts = []
        for d, (dim, padded) in enumerate(zip(layout.shape, layout.padded_shape, strict=True)):
            if padded != dim:
                parts.append(
                    f"dimension {d} has {dim} elements, its blocks cover {padded} "
                    f"(block {layout.block[d]})"
                )
        return (
            f"{operand.label}: "
            + "; ".join(parts)
            + ". Mask what the edge block reads past the array's end (compare element "
            "positions, from pl.program_id, with the array's size) or keep that padding "
            "out of the result."
        )
    if cause == "never-written":
        if in_blocks and not geometry.whole_array(operand):
            return (
                f"Programs' blocks of {operand.label} cover them, but no program stores "
                "them: the kernel writes only part of its block, and the rest is written "
                "back as the buffer held it (uninitialized). Store every element of the "
                f"block, or make {operand.label}'s block only as large as what is written."
            )
        if geometry.whole_array(operand):
            return (
                f"No program stores them: the kernel stores only some elements of "
                f"{operand.label}, and the rest keep what the buffer held (uninitialized "
                "memory). Store every element, or check the grid (pl.cdiv(n, block) "
                f"programs cover n elements) and the offsets and masks of the stores into "
                f"{operand.label}."
            )
        if not coverage_known:  # which blocks cover them is not known: claim neither
            return (
                f"No program stores them, and they keep what the buffer held "
                f"(uninitialized): store every element of {operand.label}'s blocks, and "
                "check the grid and the output's index map."
            )
        return (
            f"No program's block of {operand.label} covers them: check the grid and the "
            "output's index map."
        )
    if cause == "uninitialized-output":
        k = position - call.num_scalars
        if k < len(call.program.written) and not call.program.written[k]:
            return (
                f"The kernel never stores into {operand.label}: write it with "
                f"{operand.label}[...] = value ({operand.label} = value only rebinds a "
                "Python name)."
            )
        if k < len(call.program.reads_initial_block) and call.program.reads_initial_block[k]:
            return (
                f"A program reads its block of {operand.label} before writing it (e.g. += "
                "without zeroing it first under pl.when(... == 0))."
            )
        return (
            f"Some program's block of {operand.label} holds elements it does not store, "
            "and they are written back as the buffer held them, over what another "
            "program stored there."
        )
    return f"Write {operand.label} before reading it in every program that reads it."
