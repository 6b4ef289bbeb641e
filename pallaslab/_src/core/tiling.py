"""Tile maps and element-level accesses of an inspection's kernels.

The geometry is pure NumPy (`geometry/`); this module supplies what only the
traced program knows: the scalar-prefetch values of the run (`prefetch`), and each
program's blocks of real data for interpreting the kernel body. Also the one check,
before a run, for blocks that miss their arrays.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.core import jax_adapter, mosaic_gpu
from pallaslab._src.core.jax_adapter.body_eval import uninitialized
from pallaslab._src.core.prefetch import kernel_inputs, prefetch_values, sized_kernel
from pallaslab._src.core.program import Traced, program_of
from pallaslab._src.core.seeded import example_arrays
from pallaslab._src.geometry import blocks as geometry_blocks
from pallaslab._src.geometry.accesses import BlockAccesses, RefInfo
from pallaslab._src.geometry.blocks import StrayBlock
from pallaslab._src.geometry.tilemap import TileMap, schedule_of
from pallaslab._src.records import Kernel


def tile_map(
    inspection: Traced,
    kernel: int | str = 0,
    prefetch: Sequence[Any] | None = None,
    schedule: str | None = None,
) -> TileMap:
    """The tile map of one of an inspection's kernels.

    Scalar-prefetch values, when the index maps need them and none are given, are
    those of the example arguments (seeded random arrays where only shapes were
    given: the same `Inspection.run()` uses). A Mosaic GPU kernel on a mesh has no
    BlockSpecs: its map is where its copies go (`geometry.mosaic_gpu.CopyMap`).
    """
    record = inspection.kernel(kernel)
    if mosaic_gpu.copies_are_the_map(record):  # no BlockSpecs: the copies the body makes
        try:
            return mosaic_gpu.copy_map(inspection, record.index)
        except ValueError:
            pass  # a body pallaslab cannot follow: its operands, whole, as for any mesh kernel
    record = sized_kernel(program_of(inspection), record)
    if prefetch is None:
        prefetch = _prefetch(inspection, record) if record.num_scalar_prefetch else ()
    chosen = schedule or schedule_of(record, inspection.backend)
    return TileMap(record, prefetch, chosen)


def _site(inspection: Traced, record: Kernel) -> jax_adapter.KernelSite | None:
    program = program_of(inspection)
    if program is None or record.index >= len(program.sites):
        return None
    return program.sites[record.index]


def _prefetch(inspection: Traced, record: Kernel) -> tuple[np.ndarray, ...]:
    return prefetch_values(program_of(inspection), record.index)


def stray_blocks(
    inspection: Traced, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
) -> list[tuple[Kernel, StrayBlock]]:
    """Blocks of an inspection's kernels that lie wholly outside their arrays.

    The one pre-check before a run (the magic, tuning, grading): index maps that
    read scalar-prefetch values get those of the call on `args` and `kwargs` (laid
    out as for the inspected call; without them, the example arguments; shapes
    become a run's seeded data).

    Returns:
        (kernel, its first stray block) per operand with one, in kernel order.
    """
    program = program_of(inspection)
    leaves = (
        program.leaves_of(args, kwargs)
        if program is not None and program.split is not None and (args or kwargs)
        else None
    )
    found: list[tuple[Kernel, StrayBlock]] = []
    for listed in inspection.kernels:
        try:
            kernel = sized_kernel(program, listed, leaves)
        except ValueError:  # a grid whose size is unknown here: nothing to pre-check
            continue
        values = (
            prefetch_values(program, kernel.index, leaves) if kernel.num_scalar_prefetch else ()
        )
        found.extend((kernel, stray) for stray in geometry_blocks.stray_blocks(kernel, values))
    return found


def block_accesses(
    inspection: Traced, kernel: int | str = 0, program: Sequence[int] | None = None
) -> BlockAccesses:
    """Every element-level load and store one program of a kernel makes.

    The body is interpreted for that program on its blocks of the example inputs
    (random data where the inputs are too large to evaluate, or unknown); outputs
    and scratch start as NaN, as in Pallas' interpreter.

    Args:
        inspection: The inspection.
        kernel: The kernel's index or name.
        program: Grid indices of the program (default: the first).

    Raises:
        ValueError: For kernels the interpreter cannot run (mesh kernels).
    """
    record = inspection.kernel(kernel)
    tiles = tile_map(inspection, record.index)
    chosen = tiles.program_at(tiles.position(program) if program is not None else 0)
    site = _site(inspection, record)
    if site is None or record.kind != "pallas_call":
        raise ValueError(
            f"element-level accesses are recorded for pallas_call kernels; {record.name} is "
            f"a {record.kind}"
        )
    if (notice := jax_adapter.feature_notice("element-accesses")) is not None:
        raise ValueError(notice)
    notices: list[str] = []
    values = _operand_values(inspection, site, record, notices)
    shapes = jax_adapter.body_ref_shapes(site)
    buffers = [
        _block(tiles, k, chosen, values[k], shape=shape, dtype=dtype)
        for k, (shape, dtype) in enumerate(shapes)
    ]
    mapped = [a for a, _ in enumerate(record.grid) if a not in record.vmapped_dims]
    recorded = jax_adapter.interpret_program(
        site,
        [chosen[a] for a in mapped],
        [record.grid[a] for a in mapped],
        buffers,
    )
    refs = [
        RefInfo(
            operand=k,
            label=o.label,
            role="prefetch" if o.scalar_prefetch else o.role,
            shape=tuple(shapes[k][0]),
            dtype=shapes[k][1],
        )
        for k, o in enumerate(record.operands)
    ]
    refs += [
        RefInfo(-1, f"scoped[{k}]", "scoped", shape, dtype)
        for k, (shape, dtype) in enumerate(recorded.scoped)
    ]
    if recorded.stopped:
        notices.append(f"Interpretation {recorded.stopped}; accesses after it are not shown.")
    return BlockAccesses(
        kernel=record.name,
        program=chosen,
        refs=tuple(refs),
        accesses=recorded.accesses,
        notices=tuple(notices),
        complete=not recorded.stopped,
    )


def _operand_values(
    inspection: Traced, site: jax_adapter.KernelSite, record: Kernel, notices: list[str]
) -> list[np.ndarray | None]:
    """Each operand's whole array, where known (inputs); None for outputs and scratch."""
    found: list[np.ndarray | None] = [None] * len(record.operands)
    inputs = kernel_inputs(program_of(inspection), record.index)
    arrays = inputs.operands
    if arrays is None:
        notices.append(
            f"Block values are random (the kernel's real inputs could not be evaluated here: "
            f"{inputs.reason}): accesses that depend on data may differ in a real run."
        )
        return found
    for k, operand in enumerate(record.operands):
        if operand.role == "in" and k < len(arrays):
            found[k] = np.asarray(arrays[k])
    for source, target in record.input_output_aliases:
        position = int(source)  # counts scalar-prefetch operands, as pallas_call does
        outputs = [k for k, o in enumerate(record.operands) if o.role == "out"]
        if int(target) < len(outputs) and position < len(found):
            found[outputs[int(target)]] = found[position]
    return found


def _block(
    tiles: TileMap,
    index: int,
    program: tuple[int, ...],
    whole: np.ndarray | None,
    *,
    shape: tuple[int, ...],
    dtype: str,
) -> np.ndarray:
    """The block a body ref starts with: the program's window of `whole`, padded.

    Padding (and outputs, scratch) read NaN for floats, as in Pallas' interpreter;
    without real data, inputs get seeded random values.
    """
    kind = np.dtype(dtype)
    fill = uninitialized(kind)  # the evaluators' one filler (int4 and bfloat16 too)
    entry = tiles.operands[index]
    if whole is None:
        if entry.operand.role != "in":
            return np.full(shape, fill, dtype=kind)
        rng = np.random.default_rng(index)
        if kind.kind in "iu":
            return rng.integers(0, 4, shape).astype(kind)
        if kind.kind == "b":
            return rng.random(shape) < 0.5
        return rng.standard_normal(shape).astype(kind)
    if not entry.mapped or entry.access != "pipelined":
        return np.asarray(whole, dtype=kind).reshape(shape)
    spans = tiles.block(index, program)
    window = np.full([hi - lo for lo, hi in spans], fill, dtype=kind)
    source = []
    target = []
    for (lo, hi), n in zip(spans, whole.shape, strict=True):
        a, b = max(lo, 0), min(hi, n)
        source.append(slice(a, max(a, b)))
        target.append(slice(a - lo, a - lo + max(b - a, 0)))
    window[tuple(target)] = whole[tuple(source)]
    squeezed = [d for d, k in enumerate(entry.operand.block_kinds) if k == "squeezed"]
    block = window.reshape([n for d, n in enumerate(window.shape) if d not in squeezed])
    if block.shape != shape:  # a bounded slice shorter than its block: pad to the ref
        padded = np.full(shape, fill, dtype=kind)
        padded[tuple(slice(0, min(a, b)) for a, b in zip(block.shape, shape, strict=True))] = block[
            tuple(slice(0, min(a, b)) for a, b in zip(block.shape, shape, strict=True))
        ]
        block = padded
    return block


def race_report(inspection: Traced, kernel: int | str = 0, backend: str = "gpu") -> Any:
    """A kernel's races under `backend`'s rules (`sharing.RaceReport`).

    Outputs that programs share in memory are decided element by element, running the
    kernel on the example inputs (seeded random data where they are shapes, or where
    the kernel's inputs cannot be evaluated alone: then the report says so).
    """
    from pallaslab._src.core import emulator, sharing  # noqa: PLC0415 - heavy, on use
    from pallaslab._src.geometry import races  # noqa: PLC0415

    record = sized_kernel(program_of(inspection), inspection.kernel(kernel))
    prefetch = _prefetch(inspection, record) if record.num_scalar_prefetch else ()
    site = _site(inspection, record)
    if (
        site is None
        or record.kind != "pallas_call"
        or not races.needs_elements(record, backend, prefetch)
    ):
        return sharing.RaceReport(backend, tuple(races.find_races(record, backend, prefetch)))
    call, plan = emulator.analyse(site.params, site.in_avals)
    notices: list[str] = []
    operands = _kernel_operands(inspection, record, site, notices)
    report = sharing.kernel_races(call, plan, operands, backend)
    if notices and report.shared:
        notice = " ".join([*notices, report.notice]).strip()
        report = dataclasses.replace(report, notice=notice)
    return report


def _kernel_operands(
    inspection: Traced, record: Kernel, site: jax_adapter.KernelSite, notices: list[str]
) -> list[Any]:
    """The values a kernel receives in the program (seeded random data when unknown)."""
    inputs = kernel_inputs(program_of(inspection), record.index)
    if inputs.operands is not None:
        return inputs.operands
    notices.append(
        "Element-level accesses were found on random inputs (the kernel's own inputs "
        f"could not be evaluated here: {inputs.reason}): accesses that depend on data may "
        "differ."
    )
    specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in site.in_avals]
    return example_arrays(specs)
