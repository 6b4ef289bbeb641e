"""An `xla-gpu:<chip>` lowering as a `Lowered` record: SASS, stages, resources, notes.

`targets.xla_gpu` exports and compiles (`xla_gpu`); this module reads what came back. The
main text is the kernel's SASS; the stages are its PTX, the ptxas report, Mosaic
GPU's pass pipeline (module by module), the optimised HLO of the program around the
kernel and of the kernel alone, and XLA's launch sequence.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pallaslab._src.core import gpu_toolchain
from pallaslab._src.core.lowering import sourcemap, xla_gpu, xla_gpu_texts
from pallaslab._src.core.lowering.failures import first_lines, strip_status
from pallaslab._src.core.lowering.occupancy import occupancy
from pallaslab._src.records import Kernel, SourceLocation, hardware
from pallaslab._src.records.lowered import GpuResources, Lowered, LoweringError, Stage

if TYPE_CHECKING:
    from pallaslab._src.core.jax_adapter import GpuExport
    from pallaslab._src.records.targets import Target

COMPILE_ONLY_NOTE = (
    "Compile-only: with no GPU attached XLA does not autotune, so its own fusions (and "
    "GEMM tilings) can differ from an on-device build; Pallas kernels are compiled as "
    "written."
)
TRITON_LOCATIONS_NOTE = (
    "XLA strips source locations from Triton kernels before linking them into its "
    "module, so XLA's PTX and SASS of a Triton kernel carry no source lines: the "
    "'ptx:{arch}' and 'sass:{arch}' targets (the triton package) show the same kernel "
    "linked to its source."
)


def header(target: Target, what: str, jax_version: str) -> str:
    """What produced an `xla-gpu` lowering, with versions."""
    chain = gpu_toolchain.toolchain()
    gpu = hardware.gpu(target.arch)
    plugin = (
        f"{chain.plugin.distribution} {chain.plugin_version}"
        if chain.plugin
        else "JAX's CUDA plugin (not installed)"
    )
    return (
        f"SASS of {what} for {gpu.full_name} ({gpu.arch}): XLA's own compile by {plugin}, "
        f"compile-only (no GPU), of the {jax_version} Pallas lowering; "
        f"ptxas {gpu_toolchain.tool_version(chain.ptxas) or '?'}, "
        f"nvdisasm {gpu_toolchain.tool_version(chain.nvdisasm) or '?'}."
    )


def build(
    target: Target,
    kernel: Kernel,
    job: xla_gpu.CompiledJob | None,
    export: GpuExport,
    program: xla_gpu.CompiledJob | None,
    *,
    jax_version: str,
    alone: bool = True,
) -> Lowered | LoweringError:
    """The record for one kernel, or why XLA could not compile it.

    `job` is the compile that made the kernel's code: of the kernel alone, or (`alone`
    False) of a program that is just this kernel. `program` is the program's compile.
    """
    chip = target.arch
    if job is None or job.error:
        detail = job.error if job else "the worker returned no result for the kernel"
        return LoweringError(
            f"XLA could not compile {kernel.name} for {chip}: {first_lines(strip_status(detail))}",
            _location_in(detail, kernel) or kernel.call_site or kernel.source,
            detail=detail,
            kind="compile",
        )
    default_file = kernel.source.file if kernel.source else ""
    gpu = hardware.gpu(chip)
    notes = list(export.notices)
    stages: list[Stage] = []
    resources: GpuResources | None
    if job.mosaic:
        mosaic = job.mosaic[0]
        sass = mosaic.sass
        ptx = mosaic.ptx
        report = mosaic.ptxas
        resources = _mosaic_resources(mosaic, gpu)
        arch = _ptx_target(ptx) or gpu.arch
        if mosaic.sass_from != "captured":
            notes.append("Mosaic GPU did not hand its cubin over: this SASS is ptxas' on its PTX.")
        if len(job.mosaic) > 1:
            notes.append(f"Mosaic GPU compiled {len(job.mosaic)} kernels; this is the first.")
        pipeline = [
            _stage(f"Mosaic GPU {name}", text, "mlir", default_file) for name, text in mosaic.passes
        ]
    else:
        resources, arch, name = _xla_resources(job, kernel, gpu)
        if any(m.sass_from != "captured" for m in job.modules):
            notes.append("XLA's cubin was not kept: this SASS is ptxas' on XLA's PTX.")
        # The kernel's own function: the modules also hold what XLA fused around it.
        sass = "\n".join(
            xla_gpu_texts.sass_function(m.sass, name) for m in job.modules if name in m.sass
        )
        ptx = "\n".join(
            xla_gpu_texts.ptx_function(m.ptx, name) for m in job.modules if name in m.ptx
        )
        report = "\n".join(m.ptxas for m in job.modules if name in m.ptxas)
        if not name:
            sass = "\n".join(_labelled(m.file, m.sass) for m in job.modules)
            ptx = "\n".join(_labelled(m.file, m.ptx) for m in job.modules)
            report = "\n".join(m.ptxas for m in job.modules)
        notes.append(TRITON_LOCATIONS_NOTE.format(arch=gpu.arch))
        pipeline = []
    if not sass.strip():
        return LoweringError(
            f"XLA compiled {kernel.name} for {chip} but wrote no kernel code pallaslab could "
            "read (no PTX in its dumps).",
            kernel.source,
            kind="compile",
        )
    stages.append(_stage("ptx", ptx, "ptx", default_file))
    stages.append(Stage("ptxas", report, "text"))
    stages.extend(pipeline)
    if program is not None and program.hlo:
        stages.append(_stage("hlo (program)", program.hlo, "hlo", default_file))
        stages.append(Stage("launches (program)", program.thunks, "text"))
    elif program is not None and program.error:
        failed = first_lines(program.error)
        notes.append(f"The program around the kernel did not compile: {failed}")
    if alone:
        stages.append(_stage("hlo (kernel alone)", job.hlo, "hlo", default_file))
    notes.append(COMPILE_ONLY_NOTE)
    text, source_map = sourcemap.sass_text(sass, default_file)
    what = f"kernel {kernel.name}"
    return Lowered(
        target=target.name,
        kernel=kernel.name,
        kernel_index=kernel.index,
        language="sass",
        header=header(target, what, jax_version).replace(f"({gpu.arch})", f"({arch})", 1),
        text=text,
        source_map=sourcemap.readable(source_map),
        raw_text=sass,
        resources=resources,
        stages=tuple(s for s in stages if not _empty(s)),
        notes=tuple(notes),
    )


def _empty(stage: Stage) -> bool:
    return stage.empty if isinstance(stage, CleanedOnUse) else not stage.text.strip()


def _labelled(file: str, text: str) -> str:
    return f"// ---- {file}\n{text}" if text else ""


def _ptx_target(ptx: str) -> str:
    for line in ptx.splitlines():
        stripped = line.strip()
        if stripped.startswith(".target "):
            return stripped.split()[1].rstrip(",")
    return ""


def _mosaic_resources(mosaic: xla_gpu.MosaicKernel, gpu: hardware.Gpu) -> GpuResources:
    report = xla_gpu_texts.ptxas_report(mosaic.ptxas).get(mosaic.entry, {})
    threads = xla_gpu_texts.threads_per_block(mosaic.ptx) or 128
    static_shared = xla_gpu_texts.static_shared(mosaic.ptxas)
    shared = xla_gpu_texts.mosaic_dynamic_shared(mosaic.passes) + static_shared
    return _resources(
        gpu, _ptx_target(mosaic.ptx), threads=threads, report=report, shared=shared, num_stages=None
    )


def _xla_resources(
    job: xla_gpu.CompiledJob, kernel: Kernel, gpu: hardware.Gpu
) -> tuple[GpuResources | None, str, str]:
    """Resources, architecture and function name of the Triton kernel XLA launched."""
    launches = [
        launch for launch in xla_gpu_texts.launches(job.thunks) if launch.kind == "kCustomKernel"
    ]
    reports: dict[str, dict[str, int]] = {}
    arch = ""
    for module in job.modules:
        reports.update(xla_gpu_texts.ptxas_report(module.ptxas))
        arch = arch or _ptx_target(module.ptx)
    if not launches:
        return None, arch or gpu.arch, ""
    launch = launches[0]
    report = reports.get(launch.name, {})
    threads = 1
    for count in launch.threads:
        threads *= count
    stages = dict(kernel.compiler_params).get("num_stages")
    resources = _resources(
        gpu,
        arch,
        threads=threads,
        report=report,
        shared=launch.shared_bytes,
        num_stages=int(stages) if stages and stages.isdigit() else 3,
    )
    return resources, arch or gpu.arch, launch.name


def _resources(
    gpu: hardware.Gpu,
    arch: str,
    *,
    threads: int,
    report: dict[str, int],
    shared: int,
    num_stages: int | None,
) -> GpuResources:
    num_warps = max(1, threads // 32)
    registers = report.get("registers")
    return GpuResources(
        arch=arch or gpu.arch,
        num_warps=num_warps,
        num_stages=num_stages,
        registers_per_thread=registers,
        spill_store_bytes=report.get("spill_stores"),
        spill_load_bytes=report.get("spill_loads"),
        local_bytes=report.get("local"),
        stack_bytes=report.get("stack"),
        shared_bytes=shared,
        occupancy=(
            occupancy(
                gpu,
                num_warps=num_warps,
                registers_per_thread=registers or 0,
                shared_bytes=shared,
                compiled_arch=gpu.arch,
            ),
        ),
    )


def _stage(name: str, raw: str, language: str, default_file: str) -> Stage:
    if language == "hlo":
        raw = sourcemap.elide_long_strings(raw)
    return CleanedOnUse(name, raw, language, default_file)


class CleanedOnUse(Stage):
    """A stage whose location noise is read out when its text is first asked for.

    Mosaic GPU's pipeline of an attention kernel is tens of thousands of lines per
    pass: most stages are never looked at, so none is cleaned before it is.
    """

    def __init__(self, name: str, raw: str, language: str, default_file: str) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "language", language)
        object.__setattr__(self, "_raw", (raw, default_file))
        object.__setattr__(self, "_cleaned", None)

    def _clean(self) -> tuple[str, sourcemap.SourceMap]:
        cleaned: tuple[str, sourcemap.SourceMap] | None = self.__dict__["_cleaned"]
        if cleaned is None:
            raw, default_file = self.__dict__["_raw"]
            text, source_map = sourcemap.clean(raw, self.language, default_file)
            cleaned = (text, sourcemap.readable(source_map))
            object.__setattr__(self, "_cleaned", cleaned)
        return cleaned

    @property
    def text(self) -> str:
        """The text, location noise hidden."""
        return self._clean()[0]

    @property
    def source_map(self) -> sourcemap.SourceMap:
        """(text line, file, source line) entries."""
        return self._clean()[1]

    @property
    def empty(self) -> bool:
        """Whether there is no text (known without cleaning it)."""
        return not self.__dict__["_raw"][0].strip()


def _location_in(text: str, kernel: Kernel) -> SourceLocation | None:
    """The kernel's file:line in a compiler message, when it names one."""
    wanted = kernel.source.file if kernel.source else ""
    for match in re.finditer(r'"?([^\s":()]+\.py)"?:(\d+)', text):
        if wanted and match.group(1) == wanted:
            return SourceLocation(match.group(1), int(match.group(2)))
    return None
