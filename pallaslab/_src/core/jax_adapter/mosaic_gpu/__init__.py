"""Reading what a Mosaic GPU kernel does off its traced body (`MosaicGpuPlan` records).

`reading.kernel_plan` is the entry: `plan` makes the record of a mesh kernel,
`pallas_call` of a Mosaic GPU `pallas_call`: allocations read statically (as Mosaic
GPU's own resource estimate does), copies, products and pipelines found by `walker`,
which follows the body for every CTA and warpgroup at once (`values` evaluates its
index arithmetic, `refs` its ref transforms, `products` its matrix products,
`control` its loops and branches, `events` what it records). Nothing is imported
here: `work.py` reads `products` while the kernels package is still loading.
"""
