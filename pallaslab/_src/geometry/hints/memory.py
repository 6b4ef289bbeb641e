"""Hint rules on on-chip memory: working sets against VMEM / shared memory, occupancy, spills."""

from __future__ import annotations

from pallaslab._src.base import words
from pallaslab._src.geometry.hints.inputs import (
    HintInputs,
    call_line,
    make_hint,
    occupancy_row,
)
from pallaslab._src.geometry.merit import on_chip
from pallaslab._src.records import hardware
from pallaslab._src.records.hints import FigureValue, Hint, Severity

# Occupancy at or below which a GPU kernel has too few warps to hide latency.
LOW_OCCUPANCY = 0.25


def working_set(inputs: HintInputs) -> list[Hint]:
    """Blocks of one program that do not fit in VMEM or shared memory."""
    merit = inputs.merit
    if merit is None or not merit.working_set_bytes or inputs.blocks_in_global:
        return []  # Triton: the compile's shared memory tells (see `occupancy`)
    if inputs.plan is not None:
        return []  # Mosaic GPU: what it allocates is known (`mosaic_gpu.smem_over_budget`)
    fit = on_chip(merit, inputs.chip)
    if fit.fits:
        return []
    largest = max(
        (o for o in inputs.kernel.operands if o.role != "scratch"),
        key=lambda o: o.block_bytes,
        default=None,
    )
    figures: list[tuple[str, FigureValue]] = [
        ("working set bytes", merit.working_set_bytes),
        ("capacity bytes", fit.capacity_bytes),
    ]
    if fit.kind == "tpu":
        return [
            make_hint(
                inputs,
                "working-set",
                "error",
                f"The blocks of one program take {words.nbytes(merit.working_set_bytes)} (each "
                f"pipelined block twice: one copy in flight), more than the "
                f"{words.nbytes(fit.capacity_bytes)} of {fit.capacity_name} on {inputs.chip.name}: "
                "the kernel will not compile. Use smaller blocks, pl.Buffered(1) for blocks "
                "that never change, or raise CompilerParams(vmem_limit_bytes=...) as far as "
                "the physical VMEM.",
                largest.blockspec_location if largest else None,
                figures,
            )
        ]
    return [
        make_hint(
            inputs,
            "working-set",
            "warning",
            f"The blocks of one program take {words.nbytes(merit.working_set_bytes)} "
            "(double-buffered), more than the "
            f"{words.nbytes(fit.capacity_bytes)} of shared memory a thread block can have on "
            f"{inputs.chip.name}: the pipeline cannot hold them. Smaller blocks, or fewer "
            "buffers (pl.Buffered), fit.",
            largest.blockspec_location if largest else None,
            figures,
        )
    ]


def scoped_vmem(inputs: HintInputs) -> list[Hint]:
    """Blocks over the chip's default scoped VMEM, within its VMEM: vmem_limit_bytes fits them.

    The figure is libtpu's when a compile for the chip was made (`tpu-compile:<chip>`,
    `inspection.fit()`), else the blocks x buffers + scratch in (8, 128) tiles.
    """
    chip = inputs.chip
    if not isinstance(chip, hardware.Tpu) or not inputs.vmem_blocks:
        return []
    estimate = sum(block.padded_bytes for block in inputs.vmem_blocks)
    needed = inputs.scoped_vmem if inputs.scoped_vmem is not None else estimate
    limit = inputs.vmem_limit or chip.default_scoped_vmem
    if needed <= limit or needed > chip.vmem_per_core:
        return []  # fits; or over the whole VMEM, which `working_set` says
    origin = (
        f"libtpu's compile for {chip.name}"
        if inputs.scoped_vmem is not None
        else "the blocks x buffers + scratch, estimated; inspection.fit() reads libtpu's"
    )
    whose = "its vmem_limit_bytes" if inputs.vmem_limit else f"{chip.name}'s default scoped VMEM"
    largest = max(inputs.vmem_blocks, key=lambda b: b.padded_bytes)
    operand = next((o for o in inputs.kernel.operands if o.label == largest.operand), None)
    return [
        make_hint(
            inputs,
            "scoped-vmem",
            "warning",
            f"The kernel needs {words.nbytes(needed)} of scoped VMEM ({origin}), over "
            f"{whose} ({words.nbytes(limit)}): the compile fails unless it passes "
            f"pltpu.CompilerParams(vmem_limit_bytes={needed:,}) or more (up to the "
            f"{words.nbytes(chip.vmem_per_core)} of VMEM), or uses smaller blocks "
            f"({largest.operand}'s take {words.nbytes(largest.padded_bytes)}).",
            operand.blockspec_location if operand is not None else None,
            [
                ("scoped VMEM bytes", needed),
                ("limit bytes", limit),
                ("vmem_limit_bytes", needed),
                ("VMEM bytes", chip.vmem_per_core),
            ],
        )
    ]


def occupancy(inputs: HintInputs) -> list[Hint]:
    """Few warps per SM because registers or shared memory run out (GPU compile)."""
    gpu, row = inputs.gpu, occupancy_row(inputs)
    if gpu is None or row is None or row.limiter not in ("registers", "shared memory"):
        return []
    if row.fraction > LOW_OCCUPANCY:
        return []
    chip = inputs.chip
    assert isinstance(chip, hardware.Gpu)
    if row.limiter == "registers":
        cause = (
            f"each thread uses {gpu.registers_per_thread} registers, so an SM holds "
            f"{row.blocks_per_sm} blocks of {gpu.num_warps} warps"
        )
        fix = (
            "Fewer values live at once (smaller blocks, a smaller accumulator) or fewer "
            "warps per block free registers."
        )
    else:
        cause = (
            f"each block takes {words.nbytes(gpu.shared_bytes)} of shared memory, so an SM "
            f"({words.nbytes(chip.shared_memory_per_sm)}) holds {row.blocks_per_sm} blocks"
        )
        fix = "Fewer pipeline stages (num_stages) or smaller blocks free shared memory."
    severity: Severity = "error" if row.blocks_per_sm == 0 else "warning"
    arch = "" if row.same_arch else f" (compiled for {gpu.arch}; {chip.name} may differ)"
    return [
        make_hint(
            inputs,
            "occupancy",
            severity,
            f"Occupancy on {chip.name} is {row.fraction:.0%}{arch}: {cause}, "
            f"{row.active_warps} of {row.max_warps} warp slots, too few to hide memory "
            f"latency. {fix}",
            call_line(inputs.kernel),
            [
                ("registers per thread", gpu.registers_per_thread or 0),
                ("shared memory bytes", gpu.shared_bytes),
                ("blocks per SM", row.blocks_per_sm),
                ("active warps", row.active_warps),
                ("warp slots", row.max_warps),
                ("occupancy %", round(100 * row.fraction, 1)),
            ],
        )
    ]


def spills(inputs: HintInputs) -> list[Hint]:
    """Registers spilled to local memory (GPU compile)."""
    gpu = inputs.gpu
    if gpu is None or not gpu.spill_store_bytes:
        return []
    return [
        make_hint(
            inputs,
            "register-spills",
            "warning",
            f"ptxas spills {gpu.spill_store_bytes} bytes of registers per thread to local "
            f"memory (and loads {gpu.spill_load_bytes or 0} back): every spill is a memory "
            "access in the middle of the computation. Smaller blocks or fewer values live "
            "at once keep them in registers.",
            call_line(inputs.kernel),
            [
                ("spill store bytes", gpu.spill_store_bytes),
                ("spill load bytes", gpu.spill_load_bytes or 0),
                ("registers per thread", gpu.registers_per_thread or 0),
            ],
        )
    ]
