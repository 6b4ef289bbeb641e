"""What a Mosaic GPU kernel does, for an inspection: its plan, copy map, SMEM and merit.

The plan (`records.mosaic_gpu.MosaicGpuPlan`) is read off the kernel's traced body
once per inspection and kernel (`jax_adapter.kernel_plan`); the figures are the
geometry's (`geometry/mosaic_gpu.py`). `Inspection.tiles()`, `.merit()` and `.plan()`
come here for Mosaic GPU kernels.
"""

from __future__ import annotations

import dataclasses
import weakref

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.program import Traced, program_of
from pallaslab._src.geometry.merit import KernelMerit, kernel_merit
from pallaslab._src.geometry.mosaic_gpu import CopyMap, SmemBudget, plan_merit, smem_budget
from pallaslab._src.geometry.tilemap import TileMap
from pallaslab._src.records import Kernel
from pallaslab._src.records.mosaic_gpu import MosaicGpuPlan

_plans: weakref.WeakKeyDictionary[Traced, dict[int, MosaicGpuPlan]] = weakref.WeakKeyDictionary()


def is_mosaic_gpu(kernel: Kernel) -> bool:
    """Whether a kernel is a Mosaic GPU kernel (a GPU-mesh kernel or its `pallas_call`)."""
    return kernel.backend == "mosaic_gpu"


def copies_are_the_map(kernel: Kernel) -> bool:
    """Whether the kernel's tile map is its copies' (a mesh kernel: no BlockSpecs)."""
    return is_mosaic_gpu(kernel) and kernel.kind != "pallas_call"


def kernel_plan(inspection: Traced, kernel: int | str = 0) -> MosaicGpuPlan:
    """A Mosaic GPU kernel's plan: allocations, copies, products, pipelines (cached).

    Raises:
        ValueError: For kernels that are not Mosaic GPU kernels, or recorded kernels
            whose traced body is gone.
    """
    record = inspection.kernel(kernel)
    if not is_mosaic_gpu(record):
        raise ValueError(
            f"{record.name} is a {record.backend or record.kind} kernel; plans are read for "
            "Mosaic GPU kernels (plgpu.kernel, pl.kernel on a GPU mesh, pallas_call with "
            "plgpu.CompilerParams)"
        )
    cached = _plans.setdefault(inspection, {})
    if record.index not in cached:
        program = program_of(inspection)
        if program is None or record.index >= len(program.sites):
            raise ValueError(f"{record.name}: its traced body is not at hand")
        try:
            cached[record.index] = jax_adapter.kernel_plan(program.sites[record.index], record)
        except Exception as error:  # an unfamiliar body must not take the inspection down
            raise ValueError(
                f"pallaslab cannot follow {record.name}'s body ({type(error).__name__}: {error})"
            ) from error
    return cached[record.index]


def copy_map(inspection: Traced, kernel: int | str = 0) -> CopyMap:
    """A mesh kernel's copies as a tile map over (CTA, step)."""
    record = inspection.kernel(kernel)
    return CopyMap(record, kernel_plan(inspection, record.index))


def budget(inspection: Traced, kernel: int | str = 0) -> SmemBudget:
    """The SMEM a Mosaic GPU kernel asks for, line by line."""
    return smem_budget(kernel_plan(inspection, kernel))


def merit(tiles: TileMap, inspection: Traced) -> KernelMerit:
    """Figures of merit of a Mosaic GPU kernel's tile map: SMEM and work from its plan.

    Copies happen as Mosaic GPU's pipelines make them, whatever the schedule asked.
    """
    plan = kernel_plan(inspection, tiles.kernel.index)
    needed = smem_budget(plan)
    if isinstance(tiles, CopyMap):
        return plan_merit(tiles, needed)
    # A pallas_call: its pipeline fetches every input block at every step, and writes
    # an output block back when the next step's differs (or at the end).
    fetched, written = kernel_merit(tiles, "gpu"), kernel_merit(tiles, "tpu")
    operands = tuple(
        w if f.role == "out" else f for f, w in zip(fetched.operands, written.operands, strict=True)
    )
    moved = sum(o.hbm_bytes for o in operands)
    return dataclasses.replace(
        fetched,
        operands=operands,
        hbm_bytes=moved + plan.gmem_bytes,
        working_set_bytes=needed.total,
        flops=plan.flops,
        transcendentals=plan.transcendentals,
        flops_source="counted",
        flops_exact=plan.exact,
        matmul=bool(plan.mmas) or bool(fetched.matmul),
        working_set_name="SMEM the kernel asks for (Mosaic GPU's allocation, aligned)",
    )
