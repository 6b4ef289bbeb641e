"""Reading what a Mosaic GPU kernel does off its traced body (`MosaicGpuPlan` records).

`plan` makes the record: allocations read statically (as Mosaic GPU's own resource
estimate does), copies, products and pipelines found by `walker`, which follows the
body for every CTA and warpgroup at once (`values` evaluates its index arithmetic,
`refs` its ref transforms, `control` its loops and branches, `events` what it
records).
"""

from pallaslab._src.core.jax_adapter.mosaic_gpu.plan import kernel_plan

__all__ = ["kernel_plan"]
