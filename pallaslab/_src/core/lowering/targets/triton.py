"""The `triton` targets: a kernel's TTIR, and the triton package's compile of it per arch."""

from __future__ import annotations

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.lowering import triton_build
from pallaslab._src.core.lowering.context import LoweringContext
from pallaslab._src.core.lowering.failures import (
    LoweringFailedError,
    crashed_tool,
    first_lines,
    kernel_file,
    location_in_text,
)
from pallaslab._src.core.lowering.resources import gpu_resources
from pallaslab._src.records import Kernel
from pallaslab._src.records.lowered import Lowered, LoweringError
from pallaslab._src.records.targets import Target


def lower(lowerer: LoweringContext, target: Target, kernel: Kernel) -> Lowered:
    """The TTIR (`ttir` stage) or one stage of the compile for the target's arch."""
    if target.stage == "ttir":
        return _ttir(lowerer, target, kernel)
    build = _build(lowerer, kernel, target.arch)
    return lowerer.finish(
        target,
        kernel,
        build.texts[target.stage],
        resources=gpu_resources(build),
        notes=_payload(lowerer, kernel).notices,
    )


def _payload(lowerer: LoweringContext, kernel: Kernel) -> jax_adapter.KernelPayload:
    payload = lowerer.payload(kernel, "cuda", mosaic_gpu=False)
    if payload.backend != "triton":
        raise LoweringFailedError(
            LoweringError(
                f"'{kernel.name}' is a Mosaic GPU kernel (plgpu): it has no Triton lowering. "
                "See the 'mosaic-gpu' target.",
                kernel.call_site or kernel.source,
            )
        )
    return payload


def _ttir(lowerer: LoweringContext, target: Target, kernel: Kernel) -> Lowered:
    payload = _payload(lowerer, kernel)
    params = ", ".join(f"{k}={v}" for k, v in payload.params)
    header = f"{lowerer.header(target, kernel)} Launch: {params}."
    return lowerer.finish(target, kernel, payload.asm, header=header, notes=payload.notices)


def _build(lowerer: LoweringContext, kernel: Kernel, arch: str) -> triton_build.TritonBuild:
    payload = _payload(lowerer, kernel)

    def make() -> triton_build.TritonBuild:
        try:
            return triton_build.compile_ttir(
                payload.generic_asm or payload.asm,
                arch,
                num_warps=int(payload.param("num_warps", 4)),
                num_stages=int(payload.param("num_stages", 3)),
                kernel_file=kernel_file(kernel),
            )
        except triton_build.TritonUnavailableError as error:
            raise LoweringFailedError(LoweringError(str(error), kind="unavailable")) from None
        except Exception as error:
            message = first_lines(str(error)) or type(error).__name__
            tool = crashed_tool(str(error))
            verdict = (
                f"{tool} crashed building {kernel.name} for {arch} (not the kernel's fault; "
                "asking again retries)"
                if tool
                else f"the triton compiler rejected {kernel.name} for {arch}"
            )
            raise LoweringFailedError(
                LoweringError(
                    f"{verdict}: {message}",
                    location_in_text(str(error), kernel) or kernel.source,
                    detail=str(error),
                    kind="crashed" if tool else "compile",
                )
            ) from None

    return lowerer.share(("triton-build", kernel.index, arch), make)
