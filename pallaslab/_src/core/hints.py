"""`Inspection.hints()`: why a kernel may be slow, tied to the lines to change.

The core gathers what the rules need from the traced program: the tile map and
its figures of merit, the kernel body's matrix products (from its jaxpr), masked
loads and stores of a few programs (the body interpreted lane by lane), the TPU's
VMEM layout and (8, 128) checks, and a GPU compile's resources when one is at hand
(or asked for with `target=`). The rules themselves are NumPy only:
`geometry/hints/`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pallaslab._src.core import chips, jax_adapter, lowering, mosaic_gpu, tiling
from pallaslab._src.core.kernel_targets import DEFAULT_GPU, chip_for, kernel_family, triton_style
from pallaslab._src.core.lowering import tpu_memory, tpu_rules
from pallaslab._src.core.program import Traced, program_of
from pallaslab._src.geometry.hints import HintInputs, kernel_hints
from pallaslab._src.geometry.merit import Chip, chip_named, kernel_merit
from pallaslab._src.geometry.mosaic_gpu import smem_budget
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel, SourceLocation, hardware
from pallaslab._src.records.fit import own_vmem_limit, scoped_vmem
from pallaslab._src.records.hints import SEVERITIES, DotInfo, Hint, MaskUse, Severity
from pallaslab._src.records.lowered import GpuResources, TpuResources
from pallaslab._src.records.targets import parse_target

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
    """Performance hints for an inspection's kernels: a failed check first, then by severity.

    The work behind `pallaslab.hints` and `Inspection.hints`, whose docstrings say
    what `chip`, `kernel`, `target` and `masks` mean.
    """
    chosen = chip_named(chip) if chip else None
    kernels = inspection.kernels if kernel is None else (inspection.kernel(kernel),)
    found: list[Hint] = []
    for record in kernels:
        found += kernel_hints_of(inspection, record, chosen, target=target, masks=masks)
    return ranked(found)


def ranked(found: Sequence[Hint]) -> list[Hint]:
    """Hints in the order to act on them, each once.

    A failed check first (nothing else matters while the output is wrong), then by
    severity, then by kernel.
    """
    rank = {s: k for k, s in enumerate(SEVERITIES)}
    unique = list({(h.id, h.message, h.kernel_index, h.location): h for h in found}.values())
    return sorted(unique, key=lambda h: (h.id != CHECK_FAILED, rank[h.severity], h.kernel_index))


def kernel_hints_of(
    inspection: Traced,
    kernel: Kernel,
    chip: Chip | None = None,
    *,
    target: str | None = None,
    masks: bool = True,
) -> list[Hint]:
    """The hints of one kernel of an inspection, a failed check first.

    For `chip` when given; else for the chip of `target`, else of the last target
    the kernel was lowered for (`--target ptx:sm_90`, `lower("tpu-compile:v6e")`);
    else for the chips the kernel is written for (`kernel_family`: its params or
    mesh), else the backend at hand's; a kernel that says nothing, inspected on a
    CPU, gets both an H100's hints and a TPU's, each saying which chip it is for.
    """
    chips, committed = advised_chips(inspection, kernel, chip, target)
    tiles, merit = _tiles(inspection, kernel)
    found: list[Hint] = []
    for advised in chips:
        inputs = HintInputs(
            kernel=kernel,
            chip=advised,
            merit=merit,
            tiles=tiles,
            dots=_dots(inspection, kernel),
            gpu=_gpu_resources(inspection, kernel, advised, target),
            vmem_blocks=_vmem_blocks(kernel, advised),
            tiling_problems=_tiling_problems(kernel, advised),
            masks=_masks(inspection, kernel, tiles) if masks else (),
            blocks_in_global=triton_style(kernel),
            **_mosaic(inspection, kernel),
            scoped_vmem=_scoped_vmem(inspection, kernel, advised),
            vmem_limit=own_vmem_limit(kernel),
        )
        advice = kernel_hints(inputs)
        found += advice if committed else [_for_chip(h, advised) for h in advice]
    return ranked([*_failed_check(inspection, kernel), *found])


def advised_chips(
    inspection: Traced, kernel: Kernel, chip: Chip | None, target: str | None
) -> tuple[list[Chip], bool]:
    """The chips to advise a kernel for, and whether the kernel is bound to them.

    Bound: a chip or target was named (or lowered for), or the kernel's style or the
    backend at hand decides. Not bound: a kernel without params inspected on a CPU,
    advised for both families.
    """
    backend = inspection.backend
    if chip is not None:
        return [chip], True
    if target is not None:
        return [chip_for(kernel, target, backend)], True
    chosen = _last_target(inspection, kernel)
    if chosen:
        return [chip_for(kernel, chosen, backend)], True
    family = kernel_family(kernel)
    if not family and backend in ("gpu", "cuda", "rocm", "tpu"):
        family = "tpu" if backend == "tpu" else "gpu"
    tpu = hardware.tpu(chips.traced_chip())
    if family == "gpu":
        return [hardware.gpu(DEFAULT_GPU)], True
    if family == "tpu":
        return [tpu], True
    return [hardware.gpu(DEFAULT_GPU), tpu], False


def _last_target(inspection: Traced, kernel: Kernel) -> str:
    """The kernel target the kernel was last lowered for ("" if none: whole programs aside)."""
    for lowered in reversed(lowering.lowerings(inspection)):
        if lowered.kernel_index == kernel.index and not parse_target(lowered.target).program:
            return lowered.target
    return ""


def _for_chip(hint: Hint, chip: Chip) -> Hint:
    """A hint for one of two chip families the kernel may run on: the chip said first.

    What would stop the kernel compiling there is a warning, not an error: the
    kernel does not say it is for that chip.
    """
    severity: Severity = "warning" if hint.severity == "error" else hint.severity
    return dataclasses.replace(hint, severity=severity, message=f"On {chip.name}: {hint.message}")


#: The id of the hint a failed check gives.
CHECK_FAILED = "check-failed"


def _failed_check(inspection: Traced, kernel: Kernel) -> list[Hint]:
    """The run's check, when it failed, as the first hint of the first kernel."""
    result = inspection.result
    comparison = result.comparison if result is not None else None
    if comparison is None or comparison.ok or kernel.index != inspection.kernels[0].index:
        return []
    if comparison.problem:
        what = comparison.problem
    else:
        blocks = sum(len(t.bad_tiles) for t in comparison.tiles)
        where = f" in {blocks} output block{'s' if blocks != 1 else ''}" if blocks else ""
        what = (
            f"{comparison.mismatched} element{'s' if comparison.mismatched != 1 else ''} "
            f"differ{'s' if comparison.mismatched == 1 else ''}{where} (largest difference "
            f"{comparison.max_abs_err:.3g})"
        )
    return [
        Hint(
            id=CHECK_FAILED,
            severity="error",
            message=(
                f"The output does not match the reference: {what}. Make it right first: "
                "the advice below is for the kernel as it is, wrong results included."
            ),
            location=kernel.call_site or kernel.source,
            kernel=kernel.name,
            kernel_index=kernel.index,
            figures=(
                ("mismatched elements", comparison.mismatched),
                ("max abs error", round(float(comparison.max_abs_err), 6)),
            ),
        )
    ]


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
