"""The `xla-gpu:<chip>` target: a kernel exported for CUDA and compiled by XLA for the chip.

The kernel (and, once per chip, the whole program around it) is exported here, in
this process; `lowering.xla_gpu` compiles the exports in a worker and
`lowering.xla_gpu_lowering` reads what came back into a `Lowered`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax

from pallaslab._src.core import gpu_target_config, jax_adapter
from pallaslab._src.core.lowering import xla_gpu, xla_gpu_lowering
from pallaslab._src.core.lowering.context import LoweringContext
from pallaslab._src.core.lowering.failures import (
    LoweringFailedError,
    crashed_tool,
    explain,
    first_lines,
)
from pallaslab._src.records import Kernel
from pallaslab._src.records.lowered import Lowered, LoweringError
from pallaslab._src.records.targets import Target


def lower(lowerer: LoweringContext, target: Target, kernel: Kernel) -> Lowered:
    """The kernel's SASS, stages and resources as XLA compiles it for the target's chip."""
    chip = target.arch
    xla_gpu.prepare()  # the worker imports JAX while this process exports
    with lowerer.jax_lock:  # JAX in this process; the compile below runs in a worker
        program_export = _program_export(lowerer, chip, kernel)
    program_key = ("xla-gpu-program", chip)
    # A program of just this kernel compiles once: its compile is the kernel's.
    alone = not (
        program_export is not None
        and program_export.kernels == 1
        and len(lowerer.program.sites) == 1
    )
    with lowerer.jax_lock:
        kernel_export = _kernel_export(lowerer, kernel, chip) if alone else program_export
    assert kernel_export is not None
    if alone:
        exports = {"kernel": kernel_export.pickled}
        if program_export is not None and program_key not in lowerer.shared:
            exports["program"] = program_export.pickled  # once per chip
    else:
        assert program_export is not None
        exports = {"program": program_export.pickled}
    compiled = xla_gpu.compile_exports(chip, exports, ("kernel",) if alone else ("program",))
    if compiled.error:
        tool = crashed_tool(compiled.error)
        kind = "unavailable" if "pip install" in compiled.error else "compile"
        message = first_lines(compiled.error)
        if tool and kind != "unavailable":
            kind = "crashed"
            message = (
                f"{tool} crashed compiling {kernel.name} for {chip} (not the kernel's fault; "
                f"asking again retries): {message}"
            )
        raise LoweringFailedError(
            LoweringError(message, kernel.source, detail=compiled.error, kind=kind)
        )
    if "program" in compiled.jobs:
        lowerer.shared[program_key] = compiled.jobs["program"]
    program_job = lowerer.shared.get(program_key)
    built = xla_gpu_lowering.build(
        target,
        kernel,
        compiled.jobs.get("kernel" if alone else "program"),
        kernel_export,
        program_job if isinstance(program_job, xla_gpu.CompiledJob) else None,
        jax_version=f"jax {jax.__version__}",
        alone=alone,
    )
    if isinstance(built, LoweringError):
        raise LoweringFailedError(built)
    return built


def _kernel_export(lowerer: LoweringContext, kernel: Kernel, chip: str) -> jax_adapter.GpuExport:
    """The kernel alone, exported for CUDA as lowered for `chip` (Pallas' errors first).

    Its compiler params pick the backend (`plgpu.kernel` is Mosaic GPU whatever
    `jax_pallas_use_mosaic_gpu` says); without params JAX's default goes first.
    """

    def make() -> jax_adapter.GpuExport:
        site = lowerer.site(kernel, chip)  # traced again for the chip if it asked the GPU
        choices: tuple[bool | None, ...] = (None, True, False)
        mosaic = kernel.kind == "plgpu.kernel" or kernel.backend == "mosaic_gpu"
        if not mosaic_gpu_capable(chip):
            if mosaic:
                raise LoweringFailedError(_mosaic_gpu_too_old(kernel, chip))
            choices = (False,)  # Triton: the GPU backend this chip takes
        elif mosaic:
            choices = (True,)
        elif kernel.backend == "triton":
            choices = (False,)
        export, failed = _export_for_chip(
            jax_adapter.kernel_function(site),
            jax_adapter.kernel_avals(site),
            chip,
            choices,
            kernel,
        )
        if export is None:
            assert failed is not None
            raise LoweringFailedError(failed)
        return export

    return lowerer.share(("gpu-export", kernel.index, chip), make)


def mosaic_gpu_capable(chip: str) -> bool:
    """Whether Mosaic GPU can compile for the chip (sm_90, Hopper, or newer)."""
    return gpu_target_config.compute_capability(chip) >= (9, 0)


def _arch(chip: str) -> str:
    major, minor = gpu_target_config.compute_capability(chip)
    return f"sm_{major}{minor}"


def _mosaic_gpu_too_old(kernel: Kernel, chip: str) -> LoweringError:
    return LoweringError(
        f"{kernel.name} is a Mosaic GPU kernel, and Mosaic GPU compiles for sm_90 (Hopper) "
        f"or newer only: {chip} is {_arch(chip)}. Lower it for xla-gpu:H100 (or H200, "
        f"B200); to run it on {chip}, write it as a pl.pallas_call for Pallas' Triton "
        "backend (plgpu.TritonCompilerParams, BlockSpecs without plgpu transforms).",
        kernel.source,
        kind="unsupported",
    )


def _program_export(
    lowerer: LoweringContext, chip: str, kernel: Kernel
) -> jax_adapter.GpuExport | None:
    """The whole program exported for CUDA as lowered for `chip` (None: it cannot be).

    A Mosaic GPU kernel (`plgpu.kernel`, `plgpu.CompilerParams`) lowers only with
    Mosaic GPU, whatever JAX's default: for one, that backend is tried first.
    """
    mosaic = kernel.kind == "plgpu.kernel" or kernel.backend == "mosaic_gpu"
    choices: tuple[bool | None, ...] = (True, None, False) if mosaic else (None, True, False)
    if not mosaic_gpu_capable(chip):
        choices = (False,)  # the program's kernels as Triton kernels, where they can be

    def make() -> jax_adapter.GpuExport | None:
        program = lowerer.program
        if program.lowering_fn is None:
            return None
        return _export_for_chip(program.lowering_fn, lowerer.example_avals(), chip, choices, None)[
            0
        ]

    return lowerer.share(("gpu-program-export", chip, choices), make)


def export_program(fn: Callable[..., Any], args: Sequence[Any], chip: str) -> jax_adapter.GpuExport:
    """A whole program exported for CUDA as lowered for `chip` (for a tuning worker).

    JAX's default GPU backend first, then the others, as for the IR explorer.

    Raises:
        LoweringFailedError: When no backend takes the program (the first failure).
    """
    export, failed = _export_for_chip(fn, args, chip, (None, True, False), None)
    if export is None:
        assert failed is not None
        raise LoweringFailedError(failed)
    return export


def _export_for_chip(
    fn: Callable[..., Any],
    args: Sequence[Any],
    chip: str,
    choices: tuple[bool | None, ...],
    kernel: Kernel | None,
) -> tuple[jax_adapter.GpuExport | None, LoweringError | None]:
    """`fn` exported for `chip` with the first GPU backend choice that takes it.

    `choices` are values of `jax_pallas_use_mosaic_gpu` (None: JAX's default). When the
    first fails and another works, the export says why in a notice. Returns the export
    (None when no choice works) and the first failure, explained.
    """
    capability = gpu_target_config.compute_capability(chip)
    kind = gpu_target_config.device_kind(chip)
    failed = None
    for mosaic_gpu in choices:
        try:
            export = jax_adapter.export_for_gpu(fn, args, capability, kind, mosaic_gpu=mosaic_gpu)
        except Exception as error:
            failed = failed or explain(error, kernel, "cuda", None)
            continue
        if not mosaic_gpu_capable(chip) and "mosaic_gpu" not in export.backends:
            note = (
                f"Compiled with Pallas' Triton backend: JAX's Mosaic GPU backend needs sm_90 "
                f"(Hopper) or newer, and {chip} is {_arch(chip)}."
            )
            export = dataclasses.replace(export, notices=(*export.notices, note))
        if failed is not None:
            what = "this kernel" if kernel else "the program's kernels"
            used = "Mosaic GPU" if "mosaic_gpu" in export.backends else "Triton"
            note = (
                f"JAX's default GPU backend could not take {what} ({failed.message}); "
                f"compiled with the {used} backend."
            )
            export = dataclasses.replace(export, notices=(*export.notices, note))
        return export, failed
    return None, failed
