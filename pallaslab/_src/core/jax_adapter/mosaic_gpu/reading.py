"""The entry to reading a Mosaic GPU kernel: its plan, whichever way it was written."""

from __future__ import annotations

from pallaslab._src.core.jax_adapter.kernels import KernelSite
from pallaslab._src.core.jax_adapter.mosaic_gpu.pallas_call import pallas_call_plan
from pallaslab._src.core.jax_adapter.mosaic_gpu.plan import mesh_plan
from pallaslab._src.core.jax_adapter.probes import PALLAS_CALL
from pallaslab._src.records import Kernel
from pallaslab._src.records.mosaic_gpu import MosaicGpuPlan


def kernel_plan(site: KernelSite, kernel: Kernel) -> MosaicGpuPlan:
    """What a Mosaic GPU kernel does (see `records.mosaic_gpu`), for every CTA of its grid.

    Raises:
        ValueError: For a kernel that is not a Mosaic GPU kernel.
    """
    if kernel.backend != "mosaic_gpu":
        backend = kernel.backend or "no backend"
        raise ValueError(f"{kernel.name} is not a Mosaic GPU kernel ({backend})")
    if site.primitive == PALLAS_CALL:
        return pallas_call_plan(site, kernel)
    return mesh_plan(site, kernel)


__all__ = ["kernel_plan"]
