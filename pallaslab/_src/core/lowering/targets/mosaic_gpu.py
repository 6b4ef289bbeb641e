"""The `mosaic-gpu` target: a kernel's Mosaic GPU module as XLA's custom call carries it."""

from __future__ import annotations

from pallaslab._src.core.lowering.context import LoweringContext
from pallaslab._src.core.lowering.failures import LoweringFailedError, mosaic_gpu_layout_hint
from pallaslab._src.records import Kernel
from pallaslab._src.records.lowered import Lowered, LoweringError
from pallaslab._src.records.targets import Target

MOSAIC_GPU_NOTE = (
    "The passes that take this module to PTX and SASS live in JAX's CUDA plugin, not "
    "in jaxlib: the xla-gpu:<chip> targets run them (pallaslab[gpu-compile])."
)


def lower(lowerer: LoweringContext, target: Target, kernel: Kernel) -> Lowered:
    """The kernel's Mosaic GPU module, or why it has none (Triton params, no layout)."""
    try:
        payload = lowerer.payload(kernel, "cuda", mosaic_gpu=True)
    except LoweringFailedError as failed:
        raise LoweringFailedError(mosaic_gpu_layout_hint(failed.error, kernel)) from None
    if payload.backend != "mosaic_gpu":
        raise LoweringFailedError(
            LoweringError(
                f"'{kernel.name}' passes Triton compiler params (pltriton.CompilerParams), "
                "which select the Triton backend: it has no Mosaic GPU lowering. See the "
                "'triton' and 'ptx:sm_90' targets.",
                kernel.call_site or kernel.source,
            )
        )
    return lowerer.finish(target, kernel, payload.asm, notes=(*payload.notices, MOSAIC_GPU_NOTE))
