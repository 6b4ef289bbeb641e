"""What a lowered kernel asks of the chip, in words: one record for every presentation.

`resource_facts` turns the lowering's `GpuResources` or `TpuResources` into a
`ResourceFacts`: labelled facts (registers, spills, shared memory, VMEM, bundles,
code size), occupancy per GPU, VMEM per operand, tiling problems, unit utilization,
and a one-line summary. The IR tab's resources panel (`ir.resources`) and the CLI's
`pallaslab lower --resources` both read it; neither knows the other's format.
"""

from __future__ import annotations

import dataclasses

from pallaslab._src.base import words
from pallaslab._src.records import SourceLocation
from pallaslab._src.records.lowered import GpuResources, TpuResources
from pallaslab._src.views import fmt
from pallaslab._src.views.contracts import UtilizationRow, VmemBlockRow


@dataclasses.dataclass(frozen=True)
class OccupancyFact:
    """Theoretical occupancy on one GPU.

    Attributes:
        gpu: The GPU ("H100").
        arch: Its architecture ("sm_90").
        same_arch: Whether the kernel was compiled for it.
        blocks: Resident thread blocks per SM (0: it cannot launch).
        warps: "active / slots" warps per SM.
        percent: Occupancy, 0..100.
        limiter: What bounds it.
    """

    gpu: str
    arch: str
    same_arch: bool
    blocks: int
    warps: str
    percent: int
    limiter: str


@dataclasses.dataclass(frozen=True)
class TilingFact:
    """A block that breaks the TPU (8, 128) rule, and how to fix it."""

    operand: str
    message: str
    hint: str
    location: SourceLocation | None


@dataclasses.dataclass(frozen=True)
class ResourceFacts:
    """A lowered kernel's resources, as labelled facts.

    Attributes:
        kind: "gpu" or "tpu".
        summary: The few facts that matter most, in one line.
        facts: (label, value) pairs, in the order they read best.
        occupancy: GPU: theoretical occupancy on each GPU of the hardware table.
        vmem_fraction: TPU: VMEM of blocks and scratch over the chip's VMEM.
        vmem: TPU: VMEM per operand (rows as the IR tab's model has them).
        tiling: TPU: blocks that break the (8, 128) rule.
        utilization: TPU: unit slots used per bundle.
    """

    kind: str
    summary: str
    facts: tuple[tuple[str, str], ...]
    occupancy: tuple[OccupancyFact, ...] = ()
    vmem_fraction: float = 0.0
    vmem: tuple[VmemBlockRow, ...] = ()
    tiling: tuple[TilingFact, ...] = ()
    utilization: tuple[UtilizationRow, ...] = ()

    def fact(self, label: str) -> str | None:
        """The value of the fact called `label` (None when there is none)."""
        return next((value for name, value in self.facts if name == label), None)

    def lines(self) -> list[str]:
        """Every fact as a line of plain text (the CLI's form)."""
        lines = [f"{name}: {value}" for name, value in self.facts]
        for row in self.occupancy:
            same = "" if row.same_arch else f" (compiled for another arch than {row.arch})"
            lines.append(
                f"occupancy on {row.gpu}: {row.percent}%, {row.blocks} blocks/SM, "
                f"limited by {row.limiter}{same}"
            )
        lines.extend(
            f"VMEM {b['operand']} {b['block']} {b['dtype']} x{b['buffers']}: {b['padded']}"
            for b in self.vmem
        )
        lines.extend(f"tiling: {p.message} {p.hint}" for p in self.tiling)
        lines.extend(
            f"{u['unit']}: {u['mean']} of {u['slots']} slots per bundle" for u in self.utilization
        )
        return lines


def resource_facts(found: GpuResources | TpuResources | None) -> ResourceFacts | None:
    """The facts of a lowering's resources (None when the target tells none)."""
    if isinstance(found, GpuResources):
        return _gpu(found)
    if isinstance(found, TpuResources):
        return _tpu(found)
    return None


def _gpu(found: GpuResources) -> ResourceFacts:
    spills = (
        "-"
        if found.spill_store_bytes is None
        else f"{found.spill_store_bytes} B stores, {found.spill_load_bytes} B loads"
    )
    registers = _maybe(found.registers_per_thread)
    shared = words.nbytes(found.shared_bytes)
    occupancy = tuple(
        OccupancyFact(
            gpu=o.gpu,
            arch=o.arch,
            same_arch=o.same_arch,
            blocks=o.blocks_per_sm,
            warps=f"{o.active_warps} / {o.max_warps}",
            percent=round(100 * o.fraction),
            limiter=o.limiter,
        )
        for o in found.occupancy
    )
    best = [f"{o.gpu} {o.percent}% ({o.limiter})" for o in occupancy if o.same_arch]
    summary = [
        found.arch,
        f"{registers} registers/thread",
        f"spills: {spills}",
        f"{shared} shared/block",
        f"occupancy {', '.join(best)}" if best else "",
    ]
    return ResourceFacts(
        kind="gpu",
        summary=" · ".join(part for part in summary if part),
        facts=(
            ("architecture", found.arch),
            ("warps per block", f"{found.num_warps} ({found.threads_per_block} threads)"),
            ("pipeline stages", _maybe(found.num_stages)),
            ("registers per thread", registers),
            ("register spills", spills),
            (
                "local memory per thread",
                "-" if found.local_bytes is None else words.nbytes(found.local_bytes),
            ),
            ("shared memory per block", shared),
        ),
        occupancy=occupancy,
    )


def _tpu(found: TpuResources) -> ResourceFacts:
    share = found.vmem_bytes / found.vmem_capacity if found.vmem_capacity else 0.0
    used, capacity = words.nbytes(found.vmem_bytes), words.nbytes(found.vmem_capacity)
    vmem = f"{used} of {capacity} ({100 * share:.1f}%)"
    facts = [("chip", found.chip), ("VMEM of blocks and scratch", vmem)]
    if found.bundles is not None:
        facts.append(("bundles", str(found.bundles)))
    if found.loop_body_bundles is not None:
        facts.append(("bundles per grid step (loop body)", str(found.loop_body_bundles)))
    if found.code_bytes is not None:
        facts.append(("program code size (runtime included)", words.nbytes(found.code_bytes)))
    problems = len(found.tiling_problems)
    summary = [
        f"TPU {found.chip}",
        f"VMEM {vmem}",
        f"{found.bundles} bundles" if found.bundles is not None else "",
        f"{found.loop_body_bundles} per grid step" if found.loop_body_bundles is not None else "",
        f"program code {words.nbytes(found.code_bytes)}" if found.code_bytes is not None else "",
        f"{problems} block(s) break the (8, 128) rule" if problems else "",
    ]
    return ResourceFacts(
        kind="tpu",
        summary=" · ".join(part for part in summary if part),
        facts=tuple(facts),
        vmem_fraction=share,
        vmem=tuple(
            {
                "operand": b.operand,
                "role": b.role,
                "block": fmt.shape(b.block_shape),
                "dtype": b.dtype,
                "buffers": b.buffers,
                "bytes": words.nbytes(b.bytes),
                "padded": words.nbytes(b.padded_bytes),
            }
            for b in found.vmem_blocks
        ),
        tiling=tuple(
            TilingFact(operand=p.operand, message=p.message, hint=p.hint, location=p.location)
            for p in found.tiling_problems
        ),
        utilization=tuple(
            {"unit": unit, "slots": slots, "mean": round(mean, 2)}
            for unit, slots, mean in found.utilization
        ),
    )


def _maybe(value: int | None) -> str:
    return "-" if value is None else str(value)
