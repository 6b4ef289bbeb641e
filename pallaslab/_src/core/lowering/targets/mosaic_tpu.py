"""The `mosaic-tpu:<chip>` target: a kernel's Mosaic TPU module, before Mosaic's own passes."""

from __future__ import annotations

from pallaslab._src.core.lowering import tpu_rules
from pallaslab._src.core.lowering.context import LoweringContext
from pallaslab._src.core.lowering.failures import LoweringFailedError, tiling_error
from pallaslab._src.core.lowering.resources import tpu_resources
from pallaslab._src.records import Kernel
from pallaslab._src.records.lowered import Lowered
from pallaslab._src.records.targets import Target


def lower(lowerer: LoweringContext, target: Target, kernel: Kernel) -> Lowered:
    """The kernel's Mosaic TPU module with its VMEM use; a broken tiling rule says why."""
    problems = tpu_rules.tiling_problems(kernel)
    try:
        payload = lowerer.payload(kernel, "tpu", chip=target.arch)
    except LoweringFailedError as failed:
        if problems:
            raise LoweringFailedError(tiling_error(problems, failed.error.detail)) from None
        raise
    resources = tpu_resources(kernel, target.arch, problems)
    return lowerer.finish(target, kernel, payload.asm, resources=resources)
