"""What a compiled kernel uses: GPU registers, spills, shared memory and occupancy; TPU VMEM."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pallaslab._src.core.lowering import tpu_rules, triton_build
from pallaslab._src.core.lowering.occupancy import occupancy
from pallaslab._src.records import Kernel, hardware
from pallaslab._src.records.lowered import GpuResources, TpuResources


def gpu_resources(build: triton_build.TritonBuild) -> GpuResources:
    """Registers, spills, shared memory and occupancy of one Triton compile."""
    figures = triton_build.ptxas_figures(build.ptxas_log)
    usage = build.resource_usage
    registers = figures.get("registers", usage.get("REG"))
    shared = build.shared_bytes + figures.get("static_shared", usage.get("SHARED", 0))
    occupancies = tuple(
        occupancy(
            gpu,
            num_warps=build.num_warps,
            registers_per_thread=registers or 0,
            shared_bytes=shared,
            compiled_arch=build.arch,
        )
        for gpu in hardware.GPUS.values()
    )
    return GpuResources(
        arch=build.arch,
        num_warps=build.num_warps,
        num_stages=build.num_stages,
        registers_per_thread=registers,
        spill_store_bytes=figures.get("spill_stores"),
        spill_load_bytes=figures.get("spill_loads"),
        local_bytes=usage.get("LOCAL"),
        stack_bytes=figures.get("stack", usage.get("STACK")),
        shared_bytes=shared,
        occupancy=occupancies,
    )


def tpu_resources(
    kernel: Kernel,
    chip: str,
    problems: Sequence[Any],
    **compiled: Any,
) -> TpuResources:
    """VMEM use against the chip's, tiling problems, and compile figures if any."""
    return TpuResources(
        chip=chip,
        vmem_blocks=tuple(tpu_rules.vmem_blocks(kernel)),
        vmem_capacity=hardware.tpu(chip).vmem_per_core,
        tiling_problems=tuple(problems),
        **compiled,
    )
