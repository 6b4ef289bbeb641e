"""The `tpu-compile:<chip>` target: libtpu's final VLIW bundles of a kernel, with its stages."""

from __future__ import annotations

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.lowering import sourcemap, tpu_memory
from pallaslab._src.core.lowering import tpu_compile as libtpu
from pallaslab._src.core.lowering.context import LoweringContext
from pallaslab._src.core.lowering.failures import (
    LoweringFailedError,
    check_tiling,
    crashed_tool,
    explain,
    first_lines,
    kernel_file,
    location_in_text,
    strip_status,
)
from pallaslab._src.core.lowering.resources import tpu_resources
from pallaslab._src.core.lowering.tpu_memory import out_of_memory
from pallaslab._src.records import Kernel
from pallaslab._src.records.lowered import Lowered, LoweringError, Stage
from pallaslab._src.records.targets import Target


def lower(lowerer: LoweringContext, target: Target, kernel: Kernel) -> Lowered:
    """The bundles, bundle counts and VMEM; Mosaic's passes, LLO and HLO as stages."""
    chip = target.arch
    check_tiling(kernel)

    def export() -> bytes:
        site = lowerer.site(kernel, chip)
        try:
            return jax_adapter.export_for_tpu(
                jax_adapter.kernel_function(site), jax_adapter.kernel_avals(site), chip
            )
        except Exception as error:
            raise LoweringFailedError(explain(error, kernel, "tpu", chip)) from None

    with lowerer.jax_lock:  # JAX in this process; the compile below runs in a worker
        lowerer.payload(kernel, "tpu", chip=chip)  # Pallas' own lowering errors first
        exported = lowerer.share(("tpu-export", kernel.index, chip), export)
    compiled = libtpu.compile_exported(exported, chip)
    default_file = kernel_file(kernel)
    mosaic_stages = [
        _stage(name, text, "mlir", default_file) for name, text in compiled.mosaic_stages
    ]
    if compiled.error:
        memory = out_of_memory(compiled.error, kernel, chip)
        tool = None if memory else crashed_tool(compiled.error)
        message = (
            f"{tool} crashed compiling {kernel.name} for TPU {chip} (not the kernel's "
            f"fault; asking again retries): {first_lines(compiled.error)}"
            if tool
            else f"libtpu could not compile {kernel.name} for TPU {chip}: "
            + (memory or first_lines(strip_status(compiled.error)))
        )
        raise LoweringFailedError(
            LoweringError(
                message,
                (kernel.call_site or kernel.source)
                if memory
                else location_in_text(compiled.error, kernel) or kernel.source,
                detail=compiled.error,
                kind="crashed" if tool else "compile",
            )
        )
    bundles = compiled.llo.get("final_bundles", "")
    total, loop = libtpu.bundle_counts(bundles)
    per_bundle = compiled.llo.get("final_hlo-static-per-bundle-utilization", "")
    resources = tpu_resources(
        kernel,
        chip,
        (),  # check_tiling passed: no tiling problems
        bundles=total,
        loop_body_bundles=loop or None,
        code_bytes=compiled.code_bytes,
        utilization=libtpu.utilization(per_bundle),
        allocations=tpu_memory.allocations(compiled.llo),
    )
    llo = compiled.llo
    stages = [
        *mosaic_stages,
        _stage("LLO (original)", llo.get("original", ""), "llo", default_file),
        _stage(
            "schedule analysis",
            llo.get("schedule-analysis_final_bundles", ""),
            "llo",
            default_file,
        ),
        _stage("per-bundle utilization", per_bundle, "text", default_file),
        _stage("compiled HLO", compiled.hlo, "hlo", default_file),
        # XLA's layout copies around the kernel are programs of their own.
        *(
            _stage(f"XLA {name} (around the kernel): final bundles", text, "llo", default_file)
            for name, text in compiled.other_programs.items()
        ),
    ]
    header = f"{lowerer.header(target, kernel)} {total} bundles"
    header += f", {loop} in the loop body (one grid step)." if loop else "."
    return lowerer.finish(
        target,
        kernel,
        bundles,
        resources=resources,
        stages=tuple(s for s in stages if s.text),
        header=header,
    )


def _stage(name: str, raw: str, language: str, default_file: str) -> Stage:
    text, source_map = sourcemap.clean(raw, language, default_file)
    return Stage(name, text, language, sourcemap.readable(source_map))
