"""`Inspection.hints()`: why a kernel may be slow, tied to the lines to change.

The core gathers what the rules need from the traced program: the tile map and
its figures of merit, the kernel body's matrix products (from its jaxpr), masked
loads and stores of a few programs (the body interpreted lane by lane), the TPU's
VMEM layout and (8, 128) checks, and a GPU compile's resources when one is at hand
(or asked for with `target=`). The rules themselves are NumPy only:
`geometry/hints/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pallaslab._src.core import jax_adapter, lowering, mosaic_gpu, tiling
from pallaslab._src.core.kernel_targets import chip_for, natural_target, triton_style
from pallaslab._src.core.lowering import tpu_memory, tpu_rules
from pallaslab._src.core.program import Traced, program_of
from pallaslab._src.geometry.hints import HintInputs, kernel_hints
from pallaslab._src.geometry.merit import Chip, chip_named, kernel_merit
from pallaslab._src.geometry.mosaic_gpu import smem_budget
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel, SourceLocation, hardware
from pallaslab._src.records.fit import own_vmem_limit, scoped_vmem
from pallaslab._src.records.hints import SEVERITIES, DotInfo, Hint, MaskUse
from pallaslab._src.records.lowered import GpuResources, TpuResources

#: Programs whose accesses are sampled for masked lanes: the first, middle, last.
SAMPLED_PROGRAMS = 3
#: Blocks past this many elements are not interpreted lane by lane for masks (memory).
MAX_MASKED_BLOCK_ELEMENTS = 1 << 21


def hints(
    inspection: Traced,
    *,
    chip: str | None = None,
    kernel: int | str | None = None,
    target: str | None = None,
    masks: bool = True,
) -> list[Hint]:
    """Performance hints for an inspection's kernels, most severe first.

    The work behind `pallaslab.hints` and `Inspection.hints`, whose docstrings say
    what `chip`, `kernel`, `target` and `masks` mean.
    """
    chosen = chip_named(chip) if chip else None
    kernels = inspection.kernels if kernel is None else (inspection.kernel(kernel),)
    found: list[Hint] = []
    for record in kernels:
        found += kernel_hints_of(inspection, record, chosen, target=target, masks=masks)
    rank = {s: k for k, s in enumerate(SEVERITIES)}
    return sorted(found, key=lambda h: (rank[h.severity], h.kernel_index))


def kernel_hints_of(
    inspection: Traced,
    kernel: Kernel,
    chip: Chip | None = None,
    *,
    target: str | None = None,
    masks: bool = True,
) -> list[Hint]:
    """The hints of one kernel of an inspection, for `chip` (default: its backend's)."""
    if chip is None:
        chip = chip_for(kernel, natural_target(kernel, inspection.backend), inspection.backend)
    tiles, merit = _tiles(inspection, kernel)
    inputs = HintInputs(
        kernel=kernel,
        chip=chip,
        merit=merit,
        tiles=tiles,
        dots=_dots(inspection, kernel),
        gpu=_gpu_resources(inspection, kernel, chip, target),
        vmem_blocks=_vmem_blocks(kernel, chip),
        tiling_problems=_tiling_problems(kernel, chip),
        masks=_masks(inspection, kernel, tiles) if masks else (),
        blocks_in_global=triton_style(kernel),
        **_mosaic(inspection, kernel),
        scoped_vmem=_scoped_vmem(inspection, kernel, chip),
        vmem_limit=own_vmem_limit(kernel),
    )
    return kernel_hints(inputs)


def _mosaic(inspection: Traced, kernel: Kernel) -> dict[str, Any]:
    """A Mosaic GPU kernel's plan and SMEM budget, for its rules (none for the others)."""
    if not mosaic_gpu.is_mosaic_gpu(kernel):
        return {}
    try:
        plan = mosaic_gpu.kernel_plan(inspection, kernel.index)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return {}  # a body pallaslab cannot read: no Mosaic GPU hints rather than wrong ones
    return {"plan": plan, "smem": smem_budget(plan)}


def _tiles(inspection: Traced, kernel: Kernel) -> tuple[TileMap | None, Any]:
    if kernel.kind != "pallas_call":
        return None, None
    try:
        tiles = tiling.tile_map(inspection, kernel.index)
        return tiles, kernel_merit(tiles)
    except (ValueError, IndexError, KeyError):
        return None, None  # a grid sized at run time, an index map needing JAX


def _site(inspection: Traced, kernel: Kernel) -> jax_adapter.KernelSite | None:
    program = program_of(inspection)
    if program is None or kernel.index >= len(program.sites):
        return None
    return program.sites[kernel.index]


def _dots(inspection: Traced, kernel: Kernel) -> tuple[DotInfo, ...]:
    site = _site(inspection, kernel)
    if site is None:
        return ()
    try:
        return jax_adapter.kernel_dots(site)
    except (AttributeError, KeyError, TypeError, ValueError):
        return ()  # an unfamiliar body: no dot hints rather than wrong ones


def _gpu_resources(
    inspection: Traced, kernel: Kernel, chip: Chip, target: str | None
) -> GpuResources | None:
    if not isinstance(chip, hardware.Gpu):
        return None
    if target is not None:
        lowered = lowering.lower(inspection, target, kernel.index)
        return lowered.resources if isinstance(lowered.resources, GpuResources) else None
    done = [
        lowered.resources
        for lowered in lowering.lowerings(inspection)
        if lowered.kernel_index == kernel.index and isinstance(lowered.resources, GpuResources)
    ]
    return next((r for r in reversed(done) if r.arch == chip.arch), done[-1] if done else None)


def _scoped_vmem(inspection: Traced, kernel: Kernel, chip: Chip) -> int | None:
    """The scoped VMEM of a libtpu compile for the chip already made (none is started)."""
    if not isinstance(chip, hardware.Tpu):
        return None
    for lowered in reversed(lowering.lowerings(inspection)):
        if lowered.kernel_index != kernel.index or lowered.target != f"tpu-compile:{chip.name}":
            continue
        if isinstance(lowered.resources, TpuResources) and lowered.resources.allocations:
            return scoped_vmem(lowered.resources.allocations)
        if lowered.error is not None:
            printed = tpu_memory.scoped_oom(lowered.error.detail)
            return printed[0] if printed else None
    return None


def _vmem_blocks(kernel: Kernel, chip: Chip) -> tuple[Any, ...]:
    if not isinstance(chip, hardware.Tpu) or kernel.kind != "pallas_call":
        return ()
    return tuple(tpu_rules.vmem_blocks(kernel))


def _tiling_problems(kernel: Kernel, chip: Chip) -> tuple[Any, ...]:
    if not isinstance(chip, hardware.Tpu) or kernel.kind != "pallas_call":
        return ()
    return tuple(tpu_rules.tiling_problems(kernel))


def sampled_programs(grid: Sequence[int], count: int = SAMPLED_PROGRAMS) -> list[tuple[int, ...]]:
    """The first, middle and last programs of a grid (fewer when the grid is small)."""
    total = 1
    for n in grid:
        total *= max(int(n), 1)
    positions = sorted({0, total // 2, total - 1})[:count]
    found = []
    for position in positions:
        index = []
        rest = position
        for size in reversed(grid):
            extent = max(int(size), 1)
            index.append(rest % extent)
            rest //= extent
        found.append(tuple(reversed(index)))
    return found


def _masks(inspection: Traced, kernel: Kernel, tiles: TileMap | None) -> tuple[MaskUse, ...]:
    if tiles is None or kernel.kind != "pallas_call" or any(n < 0 for n in kernel.grid):
        return ()
    if " mask=" not in kernel.jaxpr:
        return ()  # no masked load or store: nothing to interpret
    if any(o.block_elements > MAX_MASKED_BLOCK_ELEMENTS for o in kernel.operands):
        return ()
    totals: dict[tuple[str, int, str, str], list[int]] = {}
    programs = sampled_programs(kernel.grid)
    for program in programs:
        try:
            recorded = tiling.block_accesses(inspection, kernel.index, program)
        except Exception:  # interpreting is extra: never lose the hints over it
            return ()
        for access in recorded.accesses:
            if not access.primitive.startswith("masked") and access.mask.all():
                continue  # no mask at all
            ref = recorded.refs[access.ref]
            key = (access.file, access.line, access.kind, ref.label)
            entry = totals.setdefault(key, [0, 0, 0, access.lanes])
            entry[0] += int(access.mask.sum())
            entry[1] += access.lanes
            entry[2] += 1
    return tuple(
        MaskUse(
            kind=kind,
            ref=label,
            lanes=lanes,
            enabled=enabled,
            total=total,
            accesses=count,
            programs=len(programs),
            location=SourceLocation(file, line) if file else None,
        )
        for (file, line, kind, label), (enabled, total, count, lanes) in totals.items()
    )
