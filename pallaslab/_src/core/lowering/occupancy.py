"""Theoretical occupancy: how many blocks of a kernel an SM holds at once.

The CUDA occupancy calculator's rules: registers are allocated per warp in units of
256, shared memory per block with the system's reserve added, and an SM caps
resident warps and blocks. Pure arithmetic over `hardware.Gpu` figures.
"""

from __future__ import annotations

import math

from pallaslab._src.records.hardware import Gpu
from pallaslab._src.records.lowered import Occupancy

# Registers are handed to warps in chunks of this many (all architectures since Volta).
REGISTER_ALLOCATION_UNIT = 256


def occupancy(
    gpu: Gpu,
    *,
    num_warps: int,
    registers_per_thread: int,
    shared_bytes: int,
    compiled_arch: str = "",
) -> Occupancy:
    """Resident blocks and warps per SM for a kernel with these needs on `gpu`."""
    limits: dict[str, int] = {
        "warps": gpu.max_warps_per_sm // num_warps if num_warps else 0,
        "blocks": gpu.max_blocks_per_sm,
    }
    if registers_per_thread > gpu.max_registers_per_thread:
        limits["registers"] = 0
    elif registers_per_thread > 0:
        per_warp = _round_up(registers_per_thread * 32, REGISTER_ALLOCATION_UNIT)
        warps_by_registers = gpu.registers_per_sm // per_warp
        limits["registers"] = warps_by_registers // num_warps
    if shared_bytes > gpu.max_shared_memory_per_block:
        limits["shared memory"] = 0
    elif shared_bytes > 0:
        per_block = shared_bytes + gpu.reserved_shared_memory_per_block
        limits["shared memory"] = gpu.shared_memory_per_sm // per_block
    # Ties go to the first named: a kernel that fills the SM's warp slots is limited
    # by nothing it could change.
    order = ("warps", "blocks", "registers", "shared memory")
    limiter = min((k for k in order if k in limits), key=lambda k: limits[k])
    blocks = limits[limiter]
    return Occupancy(
        gpu=gpu.name,
        arch=gpu.arch,
        same_arch=not compiled_arch or compiled_arch == gpu.arch,
        blocks_per_sm=blocks,
        active_warps=blocks * num_warps,
        max_warps=gpu.max_warps_per_sm,
        limiter=limiter,
    )


def _round_up(value: int, unit: int) -> int:
    return math.ceil(value / unit) * unit
