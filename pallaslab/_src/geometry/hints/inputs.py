"""What the hint rules read of one kernel (`HintInputs`), and what every rule uses.

A rule turns figures into a `Hint` with `make_hint`, placed on the line to change
(`call_line`, `Operand.blockspec_location`), with figures in words (`base.words.nbytes`,
`shape_text`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pallaslab._src.geometry.merit import Chip, KernelMerit
from pallaslab._src.geometry.mosaic_gpu import SmemBudget
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel, Operand, SourceLocation, hardware
from pallaslab._src.records.hints import DotInfo, FigureValue, Hint, MaskUse, Severity
from pallaslab._src.records.lowered import BlockVmem, GpuResources, Occupancy, TilingProblem
from pallaslab._src.records.mosaic_gpu import MosaicGpuPlan


@dataclasses.dataclass(frozen=True)
class HintInputs:
    """What the rules read about one kernel.

    Attributes:
        kernel: The kernel.
        chip: The chip the hints assume.
        merit: Its figures of merit (None when the tile map could not be built).
        tiles: Its tile map (for the grid axes along which blocks repeat).
        dots: Its matrix products.
        gpu: A GPU compile's registers, shared memory and occupancy, if at hand.
        vmem_blocks: The VMEM its blocks take laid out in (8, 128) tiles (TPU).
        tiling_problems: Blocks breaking the TPU (8, 128) rule.
        masks: Masked loads and stores, over a sample of programs.
        blocks_in_global: Whether blocks are windows into global memory that the
            body loads from (Triton), rather than copies in VMEM / shared memory.
        plan: A Mosaic GPU kernel's plan (allocations, copies, products, pipelines).
        smem: A Mosaic GPU kernel's SMEM budget.
        scoped_vmem: The scoped VMEM a libtpu compile for the chip allocates (or
            printed, rounded, when it ran out), if one was made; else None.
        vmem_limit: The kernel's own `vmem_limit_bytes`, if it sets one.
    """

    kernel: Kernel
    chip: Chip
    merit: KernelMerit | None = None
    tiles: TileMap | None = None
    dots: tuple[DotInfo, ...] = ()
    gpu: GpuResources | None = None
    vmem_blocks: tuple[BlockVmem, ...] = ()
    tiling_problems: tuple[TilingProblem, ...] = ()
    masks: tuple[MaskUse, ...] = ()
    blocks_in_global: bool = False
    plan: MosaicGpuPlan | None = None
    smem: SmemBudget | None = None
    scoped_vmem: int | None = None
    vmem_limit: int | None = None


def make_hint(  # noqa: PLR0917 - every rule passes the same six, in this order
    inputs: HintInputs,
    rule: str,
    severity: Severity,
    message: str,
    location: SourceLocation | None,
    figures: Sequence[tuple[str, FigureValue]],
    *,
    subjects: Sequence[str] = (),
    locations: Sequence[SourceLocation] = (),
) -> Hint:
    kernel = inputs.kernel
    where = location or call_line(kernel)
    return Hint(
        id=rule,
        severity=severity,
        message=message,
        location=where,
        figures=tuple((name, _figure(value)) for name, value in figures),
        chip=inputs.chip.name,
        kernel=kernel.name,
        kernel_index=kernel.index,
        subjects=tuple(subjects),
        locations=tuple(dict.fromkeys(locations)) or ((where,) if where else ()),
    )


@dataclasses.dataclass(frozen=True)
class Finding:
    """One operand's part of advice several operands may share (see `grouped`).

    Attributes:
        subject: The operand ("x_ref").
        severity: How bad it is for this operand.
        detail: What is wrong with this operand, in its own sentence.
        advice: What to change: findings with the same advice (and severity) become
            one hint.
        location: The line to change for this operand (its BlockSpec).
        figures: This operand's numbers.
    """

    subject: str
    severity: Severity
    detail: str
    advice: str
    location: SourceLocation | None
    figures: Sequence[tuple[str, FigureValue]] = ()


def grouped(inputs: HintInputs, rule: str, findings: Sequence[Finding]) -> list[Hint]:
    """One hint per piece of advice, naming every operand it applies to.

    Four operands with the same too-narrow block are one hint with four details and
    the advice once, not four near-identical hints. A single operand's figures keep
    their names; several operands' are prefixed with the operand ("x_ref: padding %").
    """
    groups: dict[tuple[Severity, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.severity, finding.advice), []).append(finding)
    hints = []
    for (severity, advice), group in groups.items():
        figures = (
            list(group[0].figures)
            if len(group) == 1
            else [(f"{f.subject}: {name}", value) for f in group for name, value in f.figures]
        )
        hints.append(
            make_hint(
                inputs,
                rule,
                severity,
                " ".join([*(f.detail for f in group), advice]).strip(),
                group[0].location,
                figures,
                subjects=[f.subject for f in group],
                locations=[f.location for f in group if f.location is not None],
            )
        )
    return hints


def _figure(value: FigureValue) -> FigureValue:
    return round(value, 4) if isinstance(value, float) else value


def is_tpu(inputs: HintInputs) -> bool:
    return isinstance(inputs.chip, hardware.Tpu)


def call_line(kernel: Kernel) -> SourceLocation | None:
    """Where the grid is set, as near as is known.

    The pallas_call's line when JAX knows where it ran, else the first BlockSpec's
    (an argument of the same call), else the kernel's def line.
    """
    if kernel.call_site is not None:
        return kernel.call_site
    for operand in kernel.operands:
        found = operand.blockspec_location
        if found is not None:
            return found
    return kernel.source


def shape_text(dims: Sequence[int | None]) -> str:
    inner = ", ".join("None" if d is None else str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


def pipelined_operands(kernel: Kernel) -> list[Operand]:
    return [
        o
        for o in kernel.operands
        if o.role in ("in", "out") and not o.scalar_prefetch and o.index_map is not None
    ]


def occupancy_row(inputs: HintInputs) -> Occupancy | None:
    gpu = inputs.gpu
    if gpu is None or not gpu.occupancy:
        return None
    return next((o for o in gpu.occupancy if o.gpu == inputs.chip.name), None)
