"""Checks that run a kernel with the emulator: leaks, out-of-bounds accesses and races.

Each runs one kernel alone, on the values it receives in the program, several times in
one compiled computation:

- `find_leaks` fills edge-block padding, outputs and scratch buffers first as Pallas'
  interpreter does (NaN, or the smallest integer) and then with an ordinary value;
  output tiles that change depend on memory no program should read. The lanes masked
  loads without `other=` turn off (undefined on a GPU) are varied the same way. Each
  source is then varied alone to say which one leaks.
- `find_out_of_bounds` runs the instrumented body for every program and reports the
  loads and stores that reached outside their ref: a dynamic slice JAX clamps into
  the block (so the emulator, like Pallas' interpreter, quietly used other elements),
  or masked lanes enabled outside the array.
- `confirm_races` runs the grid in seeded orders the backend allows (concurrent
  programs reading the same state, TPU cores not reading output blocks back) and
  compares with the grid's order.

Those programs are compiled through the compile cache, keyed on the kernel, the plan
and the variants: checking an unchanged kernel again (a cell run again) compiles
nothing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import compile_cache, emulator, sharing
from pallaslab._src.core.jax_adapter import emulation as adapter
from pallaslab._src.core.jax_adapter import instrument
from pallaslab._src.geometry import races as geometry
from pallaslab._src.records import Leak, OutOfBounds, RaceCheck, SourceLocation

SEEDS = (0, 1, 2)


def _run_variants(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    requests: Sequence[emulator.Request],
) -> list[list[np.ndarray]]:
    """Outputs of the kernel under each request, computed in one compiled program."""

    def build() -> Any:
        def run(*args: Any) -> list[list[Any]]:
            return [emulator.run_call(call, plan, args, request) for request in requests]

        return run

    what = ("variants", emulator.check_key(call, plan), tuple(_for_call(r, call) for r in requests))
    results = compile_cache.compile_keyed(what, build(), operands)(*operands)
    return [[np.asarray(o) for o in outputs] for outputs in results]


def _for_call(request: emulator.Request, call: adapter.KernelCall) -> emulator.Request:
    """The request as it acts on this kernel.

    Its target (a name with a source line, different each time a cell runs) is
    resolved to "this kernel" or "not this one".
    """
    if request.applies_to(emulator.kernel_key(call.record)):
        return dataclasses.replace(request, target="")
    return emulator.Request(mode=request.mode)


def _differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the values differ (NaN equals NaN)."""
    if a.dtype.kind in "fc":
        both_nan = np.isnan(a) & np.isnan(b)
        return np.asarray(~((a == b) | both_nan))
    return np.asarray(a != b)


def _tiles(mask: np.ndarray, layout: adapter.BlockLayout) -> list[tuple[int, ...]]:
    """Tiles (block indices) holding a True element, in order."""
    if not mask.any():
        return []
    lows = [lo for lo, _ in layout.padding]
    padded = np.zeros(layout.padded_shape, bool)
    padded[tuple(slice(lo, lo + d) for lo, d in zip(lows, layout.shape, strict=True))] = mask
    split: list[int] = []
    for extent, size in zip(layout.padded_shape, layout.block, strict=True):
        split += [extent // size, size]
    tiles = padded.reshape(split).any(axis=tuple(range(1, len(split), 2)))
    return [tuple(int(v) for v in t) for t in np.argwhere(tiles)]


# ---------------------------------------------------------------------------
# Padding and never-written memory.


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
    if plan.fallback:
        return []
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
) -> list[Leak]:
    sources = [
        *((position, cause, label, None) for position, cause, label in _sources(call)),
        *(
            (site.ref, "masked-load-without-other", _ref_label(call, site.ref), site)
            for site in loads
        ),
    ]
    if not sources:
        return []
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
    if not any(_differs(a, b).any() for a, b in zip(base, varied, strict=True)):
        return []
    per_source = [varied] if len(sources) == 1 else results[2:]
    leaks = []
    for (position, cause, label, site), outputs in zip(sources, per_source, strict=True):
        for m, (want, got) in enumerate(zip(base, outputs, strict=True)):
            mask = _differs(want, got)
            if not mask.any():
                continue
            stored = None
            if cause == "uninitialized-output":
                stored = _stored_elements(call, plan, operands, position)
            found = _leak_records(
                call, kernel_index, position, cause, label, m, mask, want, stored=stored
            )
            if site is not None:
                found = [_at_load(leak, site) for leak in found]
            leaks.extend(found)
    return leaks


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


def _ref_label(call: adapter.KernelCall, position: int) -> str:
    operands = call.record.operands
    if 0 <= position < len(operands):
        return operands[position].label
    return "a scoped buffer" if position == -1 else "a ref"


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
) -> list[Leak]:
    record = call.record
    k = call.num_inputs + output
    layout = call.layouts[k]
    out_operand = record.operands[call.num_scalars + k]
    written = stored if stored is not None else _written_mask(call, k)
    found = []
    groups: list[tuple[str, np.ndarray]] = [(cause, mask)]
    if cause == "uninitialized-output" and written is not None:
        # Elements no program writes keep their initial contents: say so apart.
        groups = [("never-written", mask & ~written), (cause, mask & written)]
    for kind, part in groups:
        if not part.any():
            continue
        tiles = _tiles(part, layout)
        nan = int(np.isnan(values[part]).sum()) if values.dtype.kind in "fc" else 0
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
                location=_location(call, position, kind),
                programs=_writers(call, k, tiles[:4]),
                detail=_detail(call, position, kind),
            )
        )
    return found


def _stored_elements(
    call: adapter.KernelCall, plan: emulator.Plan, operands: Sequence[Any], position: int
) -> np.ndarray | None:
    """For a whole-array output, the elements some program stores (None otherwise).

    Every program's block covers all of such an output, so blocks cannot say which
    elements no program writes: the instrumented body can.
    """
    operand = call.record.operands[position]
    if operand.role != "out" or not geometry.whole_array(operand):
        return None
    k = position - call.num_scalars
    if call.record.num_programs < 2 or not call.program.written[k]:
        return None  # one program, or none that stores: the block-level words say more
    try:
        accesses = sharing.shared_accesses(call, plan, operands, [position])[position]
    except Exception:  # then the block-level answer stands
        return None
    return np.asarray((accesses.last_store >= 0) | (accesses.last_atomic >= 0))


def _written_mask(call: adapter.KernelCall, k: int) -> np.ndarray | None:
    """Elements of output `k` some program's block covers (None if unknown)."""
    operand = call.record.operands[call.num_scalars + k]
    index_map = operand.index_map
    if index_map is None or not index_map.evaluable or index_map.uses_prefetch:
        return None
    layout = call.layouts[k]
    covered = np.zeros(layout.padded_shape, bool)
    for start in np.unique(emulator.clamped_starts(call, k), axis=0):
        window = tuple(slice(int(s), int(s) + b) for s, b in zip(start, layout.block, strict=True))
        covered[window] = True
    lows = [lo for lo, _ in layout.padding]
    inside = tuple(slice(lo, lo + d) for lo, d in zip(lows, layout.shape, strict=True))
    return covered[inside]


def _writers(
    call: adapter.KernelCall, k: int, tiles: Sequence[tuple[int, ...]]
) -> tuple[tuple[int, ...], ...]:
    operand = call.record.operands[call.num_scalars + k]
    if operand.index_map is None or not operand.index_map.evaluable:
        return ()
    if operand.index_map.uses_prefetch:
        return ()
    layout = call.layouts[k]
    starts = emulator.clamped_starts(call, k)
    coords = geometry.program_coordinates(call.grid)
    block = np.asarray(layout.block)
    found: list[tuple[int, ...]] = []
    for tile in tiles:
        origin = np.asarray(tile) * block
        hits = np.nonzero(np.all((starts <= origin) & (origin < starts + block), axis=1))[0]
        found.extend(tuple(int(c) for c in coords[h]) for h in hits[:2])
    return tuple(dict.fromkeys(found))


def _location(call: adapter.KernelCall, position: int, cause: str) -> SourceLocation | None:
    record = call.record
    operand = record.operands[position]
    if cause in ("padding", "never-written"):
        index_map = operand.index_map  # JAX's default map has no source: no BlockSpec
        if index_map is not None and index_map.source_file:
            return SourceLocation(index_map.source_file, index_map.source_line)
    return record.source


def _detail(call: adapter.KernelCall, position: int, cause: str) -> str:
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
        if geometry.whole_array(operand):
            return (
                f"No program stores them: check the grid (pl.cdiv(n, block) programs cover "
                f"n elements) and the offsets and masks of the stores into {operand.label}."
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
        return (
            f"A program reads its block of {operand.label} before writing it (e.g. += "
            "without zeroing it first under pl.when(... == 0))."
        )
    return f"Write {operand.label} before reading it in every program that reads it."


# ---------------------------------------------------------------------------
# Loads and stores outside their ref.

# Programs named per report (the count says how many in all).
_PROGRAMS_SHOWN = 8


def find_out_of_bounds(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    *,
    kernel_index: int = 0,
) -> list[OutOfBounds]:
    """Loads and stores that reach outside their ref, in any program, per source line.

    Runs the instrumented body for every program in one compiled computation (the
    plan's batches): each access whose index is computed at run time, or that has a
    mask, says whether an enabled lane fell outside its ref, and where it reached.

    Returns:
        One `OutOfBounds` per access site that does it in some program.

    Raises:
        instrument.UnsupportedError: When the body cannot be instrumented.
    """
    if plan.fallback:
        return []
    body = call.instrumented
    if body is None:
        raise instrument.UnsupportedError(call.instrumentation_notice)
    watched = [site for site in body.sites if site.dynamic or site.masked]
    if not watched:
        return []
    probe = instrument.Probe(flags=True)

    def run(*args: Any) -> Any:
        _, probed = emulator.run_probed(call, plan, args, probe=probe)
        assert probed is not None
        return probed.programs, probed.flags, probed.low, probed.high

    what = ("bounds", emulator.check_key(call, plan))
    checked = compile_cache.compile_keyed(what, run, operands)(*operands)
    programs, flags, low, high = (np.asarray(v) for v in checked)
    order = np.lexsort(programs.T[::-1]) if programs.shape[1] else np.arange(len(programs))
    found = []
    for site in watched:
        hits = order[flags[order, site.index]]
        if not hits.size:
            continue
        first = hits[0]
        rank = len(_ref_shape(call, body, site))
        found.append(
            OutOfBounds(
                kernel=call.record.name,
                kernel_index=kernel_index,
                ref=_ref_label(call, site.ref),
                access=site.kind,
                cause="masked-lanes-outside" if site.masked else "clamped-slice",
                shape=_ref_shape(call, body, site),
                span=tuple(
                    (int(low[first, site.index, d]), int(high[first, site.index, d]))
                    for d in range(rank)
                ),
                programs=tuple(tuple(int(c) for c in programs[p]) for p in hits[:_PROGRAMS_SHOWN]),
                program_count=int(hits.size),
                location=SourceLocation(site.file, site.line) if site.file else None,
            )
        )
    return found


def _ref_shape(
    call: adapter.KernelCall, body: instrument.InstrumentedBody, site: instrument.AccessSite
) -> tuple[int, ...]:
    return body.ref_shapes[site.ref] if 0 <= site.ref < len(body.ref_shapes) else ()


# ---------------------------------------------------------------------------
# Races, confirmed by running the grid in other orders.


def confirm_races(
    call: adapter.KernelCall,
    plan: emulator.Plan,
    operands: Sequence[Any],
    backend: str,
    *,
    kernel_index: int = 0,
    seeds: Sequence[int] = SEEDS,
    conflicts: Sequence[geometry.Conflict] | None = None,
) -> RaceCheck:
    """Runs the kernel in seeded orders `backend` allows; compares with grid order.

    GPU orders permute all programs, in waves of concurrent programs that read the
    same state (so racing read-modify-writes lose updates); programs sharing an
    array write back only the elements they stored. TPU orders split the leading
    "parallel" axis across two cores and interleave them, and model each core
    keeping output blocks in VMEM without reading them back.

    `conflicts` are the geometry's (`sharing.kernel_races`), found here when not given.
    """
    record = call.record
    if conflicts is None:
        conflicts = sharing.kernel_races(call, plan, operands, backend).conflicts
    if not conflicts or plan.fallback:
        return RaceCheck(record.name, kernel_index, backend, len(conflicts), 0, False)
    key = emulator.kernel_key(record)
    requests = [emulator.Request(target=key)] + [
        emulator.Request(order=backend, seed=int(seed), target=key) for seed in seeds
    ]
    base, *others = _run_variants(call, plan, operands, requests)
    tiles: list[tuple[str, tuple[int, ...]]] = []
    worst = 0.0
    # NaN appearing where the grid's order gave a number (or vice versa) counts as inf.
    for outputs in others:
        for m, (want, got) in enumerate(zip(base, outputs, strict=True)):
            mask = _differs(want, got)
            if not mask.any():
                continue
            worst = max(worst, _max_change(want, got, mask))
            layout = call.layouts[call.num_inputs + m]
            label = record.operands[call.num_scalars + call.num_inputs + m].label
            for tile in _tiles(mask, layout):
                if (label, tile) not in tiles:
                    tiles.append((label, tile))
    return RaceCheck(
        kernel=record.name,
        kernel_index=kernel_index,
        backend=backend,
        conflicts=len(conflicts),
        orders=len(seeds),
        confirmed=bool(tiles),
        tiles=tuple(tiles[:64]),
        max_abs_diff=worst,
        seeds=tuple(int(s) for s in seeds),
    )


def _max_change(want: np.ndarray, got: np.ndarray, mask: np.ndarray) -> float:
    if want.dtype.kind not in "fciu":
        return float(mask.sum())
    a = want[mask].astype(np.float64)
    b = got[mask].astype(np.float64)
    diff = np.abs(a - b)
    return math.inf if np.isnan(diff).any() else float(diff.max())
