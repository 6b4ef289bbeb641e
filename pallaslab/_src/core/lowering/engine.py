"""Lowering a traced program's kernels for every target, once per kernel and target.

Each kernel is lowered on its own (a function binding just that kernel, on
ShapeDtypeStructs of its operands), so one kernel a target cannot take spoils
nothing else; `stablehlo` targets lower the whole program. Results are cached per
program, keyed by (kernel, target); intermediate results (the Triton IR of a kernel,
a Triton compile for one architecture, a TPU export) are shared between targets.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import jax

from pallaslab._src.base import sources
from pallaslab._src.core import chips, gpu_target_config, jax_adapter
from pallaslab._src.core.lowering import (
    sourcemap,
    tpu_compile,
    tpu_rules,
    triton_build,
    xla_gpu,
    xla_gpu_lowering,
)
from pallaslab._src.core.lowering.occupancy import occupancy
from pallaslab._src.core.lowering.toolchains import unavailable_reason
from pallaslab._src.records import Kernel, SourceLocation, hardware
from pallaslab._src.records.lowered import GpuResources, Lowered, LoweringError, Stage, TpuResources
from pallaslab._src.records.targets import DEFAULT_TPU_CHIP, Target

if TYPE_CHECKING:
    from pallaslab._src.core.program import Program

T = TypeVar("T")

TRITON_NOTE = "XLA's built-in Triton may differ in detail."
MOSAIC_GPU_NOTE = (
    "The passes that take this module to PTX and SASS live in JAX's CUDA plugin, not "
    "in jaxlib: the xla-gpu:<chip> targets run them (pallaslab[gpu-compile])."
)


class LoweringFailedError(Exception):
    """Internal: a lowering step failed with an explained error."""

    def __init__(self, error: LoweringError) -> None:
        super().__init__(error.message)
        self.error = error


class Lowerer:
    """Lowers the kernels of one traced program, caching every result."""

    def __init__(self, program: Program) -> None:
        # Weak: the cache lives as long as the program, and must not keep it alive.
        self._program_ref = weakref.ref(program)
        self._results: dict[tuple[int | None, str], Lowered] = {}
        self._shared: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.RLock()
        self.order: list[tuple[int | None, str]] = []

    @property
    def _program(self) -> Program:
        program = self._program_ref()
        if program is None:  # pragma: no cover - the program owns its lowerer
            raise ReferenceError("the traced program is gone")
        return program

    def done(self) -> list[Lowered]:
        """Everything lowered so far, the most recently asked for last."""
        return [self._results[key] for key in self.order]

    def lower(self, target: Target, kernel: Kernel | None) -> Lowered:
        """The kernel (None: the program) lowered for `target`, from the cache if there."""
        index = None if target.program or kernel is None else kernel.index
        key = (index, target.name)
        with self._lock:
            found = self._results.get(key)
            if found is None:
                started = time.perf_counter()
                try:
                    found = self._lower(target, kernel if index is not None else None)
                except LoweringFailedError as failed:
                    found = Lowered(
                        target=target.name,
                        kernel=kernel.name if kernel and index is not None else "",
                        kernel_index=index,
                        language=target.language,
                        header=self._header(target, kernel if index is not None else None),
                        text="",
                        error=failed.error,
                    )
                found = _with_seconds(found, time.perf_counter() - started)
                self._results[key] = found
            if key in self.order:
                self.order.remove(key)
            self.order.append(key)
            return found

    # -- shared intermediate results ---------------------------------------------

    def _share(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """`make()` once per key; a failure is remembered and raised again."""
        if key not in self._shared:
            try:
                self._shared[key] = make()
            except LoweringFailedError as failed:
                self._shared[key] = failed
        value = self._shared[key]
        if isinstance(value, LoweringFailedError):
            raise value
        return value  # type: ignore[no-any-return]

    # -- dispatch ------------------------------------------------------------------

    def _lower(self, target: Target, kernel: Kernel | None) -> Lowered:
        if target.kind == "tpu-compile" and kernel is not None:
            # The (8, 128) rule needs no libtpu: what is wrong with the kernel comes
            # before what is missing from the machine.
            _check_tiling(kernel)
        reason = unavailable_reason(target)
        if reason:
            raise LoweringFailedError(LoweringError(reason, kind="unavailable"))
        if target.program:
            return self._stablehlo(target)
        assert kernel is not None
        if kernel.kind != "pallas_call":
            _check_mesh_target(kernel, target)
        if target.kind == "mosaic-gpu":
            return self._mosaic_gpu(target, kernel)
        if target.kind == "triton" and (notice := jax_adapter.feature_notice("triton-lowering")):
            raise LoweringFailedError(
                LoweringError(
                    f"{notice}: the '{target.name}' target needs it. The 'mosaic-gpu' target "
                    "shows this kernel's GPU lowering.",
                    kind="unavailable",
                )
            )
        if target.kind == "triton" and target.stage == "ttir":
            return self._ttir(target, kernel)
        if target.kind == "triton":
            return self._triton_stage(target, kernel)
        if target.kind in ("mosaic-tpu", "tpu-compile") and not jax_adapter.tpu_chip_known(
            target.arch
        ):
            raise LoweringFailedError(
                LoweringError(
                    f"jax {jax.__version__}'s Pallas does not know TPU {target.arch}.",
                    kind="unavailable",
                )
            )
        if target.kind == "mosaic-tpu":
            return self._mosaic_tpu(target, kernel)
        if target.kind == "tpu-compile":
            return self._tpu_compile(target, kernel)
        if target.kind == "xla-gpu":
            return self._xla_gpu(target, kernel)
        raise LoweringFailedError(LoweringError(f"no lowering for {target.name}", kind="usage"))

    def _header(self, target: Target, kernel: Kernel | None) -> str:
        what = f"kernel {kernel.name}" if kernel else f"program {self._program.name}"
        jax_version = f"jax {jax.__version__}"
        if target.kind == "stablehlo":
            platform = target.arch or "this machine"
            detail = (
                "Pallas kernels appear as custom calls"
                if target.arch
                else "on CPU, Pallas kernels are lowered in interpret mode"
            )
            return f"StableHLO of {what} for {platform}, lowered by {jax_version}; {detail}."
        if target.kind == "mosaic-gpu":
            return (
                f"Mosaic GPU module of {what}: {jax_version} Pallas Mosaic GPU lowering, as "
                "XLA's custom call carries it (deserialized)."
            )
        if target.stage == "ttir":
            return f"Triton IR (TTIR) of {what}: {jax_version} Pallas Triton lowering."
        if target.kind == "triton":
            version = triton_build.triton_version()
            return (
                f"{target.title} of {what}: triton {version} compiler on the TTIR of the "
                f"{jax_version} Pallas lowering; {TRITON_NOTE}"
            )
        if target.kind == "mosaic-tpu":
            return (
                f"Mosaic TPU module of {what} for TPU {target.arch}: {jax_version} Pallas "
                "Mosaic lowering (before Mosaic's own passes)."
            )
        if target.kind == "xla-gpu":
            return xla_gpu_lowering.header(target, what, jax_version)
        return (
            f"Final VLIW bundles of {what} for TPU {target.arch}: libtpu "
            f"{tpu_compile.libtpu_version()} compile-only, on the {jax_version} Mosaic "
            "lowering."
        )

    # -- lowering one kernel ------------------------------------------------------

    def _site(self, kernel: Kernel, chip: str | None) -> jax_adapter.KernelSite:
        """The kernel as bound in the program, traced for `chip` when it is a TPU's.

        A kernel may ask which TPU it is on while it is traced (`emit_pipeline`'s
        tiling, `pltpu.get_tpu_info()` in the body): for a TPU target the program is
        traced again as if on that chip, once per chip. Where that cannot be done (no
        single program, or it traces to other kernels), the inspected kernel is used.
        """
        site = self._program.sites[kernel.index]
        program = self._program
        fn = program.flat_fn
        if chip is None or fn is None or not program.example_args:
            return site

        def retrace() -> tuple[jax_adapter.KernelSite, ...]:
            args = [jax.ShapeDtypeStruct(jax.numpy.shape(a), a.dtype) for a in program.example_args]
            try:
                return tuple(jax_adapter.sites_on_chip(fn, args, chip))
            except Exception:  # the inspected trace stands
                return ()

        sites = self._share(("chip-sites", chip), retrace)
        if len(sites) != len(program.sites):
            return site
        found = sites[kernel.index]
        if found.primitive != site.primitive or found.in_avals != site.in_avals:
            return site
        return found

    def _payload(
        self,
        kernel: Kernel,
        platform: str,
        *,
        mosaic_gpu: bool | None = None,
        chip: str | None = None,
    ) -> jax_adapter.KernelPayload:
        def make() -> jax_adapter.KernelPayload:
            site = self._site(kernel, chip)
            try:
                function = jax_adapter.kernel_function(site)
                with jax_adapter.deprecation_notices() as notices:
                    module = jax_adapter.lower_module(
                        function,
                        jax_adapter.kernel_avals(site),
                        platform,
                        mosaic_gpu=mosaic_gpu,
                        tpu_generation=chip,
                    )
                payloads = jax_adapter.kernel_payloads(module)
            except LoweringFailedError:
                raise
            except Exception as error:
                raise LoweringFailedError(explain(error, kernel, platform, chip)) from None
            if not payloads:
                raise LoweringFailedError(
                    LoweringError(
                        f"lowering {kernel.name} for {platform} produced no kernel",
                        kernel.call_site or kernel.source,
                    )
                )
            return dataclasses.replace(payloads[0], notices=tuple(notices))

        return self._share(("payload", kernel.index, platform, mosaic_gpu, chip), make)

    def _finish(
        self,
        target: Target,
        kernel: Kernel | None,
        raw: str,
        *,
        language: str | None = None,
        resources: GpuResources | TpuResources | None = None,
        stages: tuple[Stage, ...] = (),
        notes: tuple[str, ...] = (),
        header: str = "",
    ) -> Lowered:
        language = language or target.language
        text, source_map = sourcemap.clean(raw, language, _kernel_file(kernel))
        source_map = sourcemap.readable(source_map)
        return Lowered(
            target=target.name,
            kernel=kernel.name if kernel else "",
            kernel_index=kernel.index if kernel else None,
            language=language,
            header=header or self._header(target, kernel),
            text=text,
            source_map=source_map,
            raw_text=raw,
            resources=resources,
            stages=stages,
            notes=notes,
        )

    def _mosaic_gpu(self, target: Target, kernel: Kernel) -> Lowered:
        try:
            payload = self._payload(kernel, "cuda", mosaic_gpu=True)
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
        return self._finish(target, kernel, payload.asm, notes=(*payload.notices, MOSAIC_GPU_NOTE))

    def _triton_payload(self, kernel: Kernel) -> jax_adapter.KernelPayload:
        payload = self._payload(kernel, "cuda", mosaic_gpu=False)
        if payload.backend != "triton":
            raise LoweringFailedError(
                LoweringError(
                    f"'{kernel.name}' is a Mosaic GPU kernel (plgpu): it has no Triton lowering. "
                    "See the 'mosaic-gpu' target.",
                    kernel.call_site or kernel.source,
                )
            )
        return payload

    def _ttir(self, target: Target, kernel: Kernel) -> Lowered:
        payload = self._triton_payload(kernel)
        params = ", ".join(f"{k}={v}" for k, v in payload.params)
        header = f"{self._header(target, kernel)} Launch: {params}."
        return self._finish(target, kernel, payload.asm, header=header, notes=payload.notices)

    def _triton_build(self, kernel: Kernel, arch: str) -> triton_build.TritonBuild:
        payload = self._triton_payload(kernel)

        def make() -> triton_build.TritonBuild:
            try:
                return triton_build.compile_ttir(
                    payload.generic_asm or payload.asm,
                    arch,
                    num_warps=int(payload.param("num_warps", 4)),
                    num_stages=int(payload.param("num_stages", 3)),
                    kernel_file=_kernel_file(kernel),
                    kernel_line=kernel.source.line if kernel.source else 1,
                )
            except triton_build.TritonUnavailableError as error:
                raise LoweringFailedError(LoweringError(str(error), kind="unavailable")) from None
            except Exception as error:
                message = _first_lines(str(error)) or type(error).__name__
                raise LoweringFailedError(
                    LoweringError(
                        f"the triton compiler rejected {kernel.name} for {arch}: {message}",
                        _location_in_text(str(error), kernel) or kernel.source,
                        detail=str(error),
                        kind="compile",
                    )
                ) from None

        return self._share(("triton-build", kernel.index, arch), make)

    def _triton_stage(self, target: Target, kernel: Kernel) -> Lowered:
        build = self._triton_build(kernel, target.arch)
        return self._finish(
            target,
            kernel,
            build.texts[target.stage],
            resources=gpu_resources(build),
            notes=self._triton_payload(kernel).notices,
        )

    def _mosaic_tpu(self, target: Target, kernel: Kernel) -> Lowered:
        problems = tpu_rules.tiling_problems(kernel)
        try:
            payload = self._payload(kernel, "tpu", chip=target.arch)
        except LoweringFailedError as failed:
            if problems:
                raise LoweringFailedError(tiling_error(problems, failed.error.detail)) from None
            raise
        resources = tpu_resources(kernel, target.arch, problems)
        return self._finish(target, kernel, payload.asm, resources=resources)

    def _tpu_compile(self, target: Target, kernel: Kernel) -> Lowered:
        chip = target.arch
        _check_tiling(kernel)
        self._payload(kernel, "tpu", chip=chip)  # Pallas' own lowering errors first

        def export() -> bytes:
            site = self._site(kernel, chip)
            try:
                return jax_adapter.export_for_tpu(
                    jax_adapter.kernel_function(site), jax_adapter.kernel_avals(site), chip
                )
            except Exception as error:
                raise LoweringFailedError(explain(error, kernel, "tpu", chip)) from None

        exported = self._share(("tpu-export", kernel.index, chip), export)
        compiled = tpu_compile.compile_exported(exported, chip)
        default_file = _kernel_file(kernel)
        mosaic_stages = [
            _stage(name, text, "mlir", default_file) for name, text in compiled.mosaic_stages
        ]
        if compiled.error:
            raise LoweringFailedError(
                LoweringError(
                    f"libtpu could not compile {kernel.name} for TPU {chip}: "
                    f"{_first_lines(_strip_status(compiled.error))}",
                    _location_in_text(compiled.error, kernel) or kernel.source,
                    detail=compiled.error,
                    kind="compile",
                )
            )
        bundles = compiled.llo.get("final_bundles", "")
        total, loop = tpu_compile.bundle_counts(bundles)
        per_bundle = compiled.llo.get("final_hlo-static-per-bundle-utilization", "")
        resources = tpu_resources(
            kernel,
            chip,
            (),  # _check_tiling passed: no tiling problems
            bundles=total,
            loop_body_bundles=loop or None,
            code_bytes=compiled.code_bytes,
            utilization=tpu_compile.utilization(per_bundle),
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
        ]
        header = f"{self._header(target, kernel)} {total} bundles"
        header += f", {loop} in the loop body (one grid step)." if loop else "."
        return self._finish(
            target,
            kernel,
            bundles,
            resources=resources,
            stages=tuple(s for s in stages if s.text),
            header=header,
        )

    def _gpu_export(self, kernel: Kernel, chip: str) -> jax_adapter.GpuExport:
        """The kernel alone, exported for CUDA as lowered for `chip` (Pallas' errors first).

        Its compiler params pick the backend (`plgpu.kernel` is Mosaic GPU whatever
        `jax_pallas_use_mosaic_gpu` says); without params JAX's default goes first.
        """

        def make() -> jax_adapter.GpuExport:
            site = self._program.sites[kernel.index]
            choices: tuple[bool | None, ...] = (None, True, False)
            if kernel.kind == "plgpu.kernel" or kernel.backend == "mosaic_gpu":
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

        return self._share(("gpu-export", kernel.index, chip), make)

    def _program_gpu_export(self, chip: str, kernel: Kernel) -> jax_adapter.GpuExport | None:
        """The whole program exported for CUDA as lowered for `chip` (None: it cannot be).

        A Mosaic GPU kernel (`plgpu.kernel`, `plgpu.CompilerParams`) lowers only with
        Mosaic GPU, whatever JAX's default: for one, that backend is tried first.
        """
        mosaic = kernel.kind == "plgpu.kernel" or kernel.backend == "mosaic_gpu"
        choices: tuple[bool | None, ...] = (True, None, False) if mosaic else (None, True, False)

        def make() -> jax_adapter.GpuExport | None:
            program = self._program
            if program.flat_fn is None:
                return None
            args = [jax.ShapeDtypeStruct(jax.numpy.shape(a), a.dtype) for a in program.example_args]
            return _export_for_chip(program.flat_fn, args, chip, choices, None)[0]

        return self._share(("gpu-program-export", chip, choices), make)

    def _xla_gpu(self, target: Target, kernel: Kernel) -> Lowered:
        chip = target.arch
        xla_gpu.prepare()  # the worker imports JAX while this process exports
        program_export = self._program_gpu_export(chip, kernel)
        program_key = ("xla-gpu-program", chip)
        # A program of just this kernel compiles once: its compile is the kernel's.
        alone = not (
            program_export is not None
            and program_export.kernels == 1
            and len(self._program.sites) == 1
        )
        kernel_export = self._gpu_export(kernel, chip) if alone else program_export
        assert kernel_export is not None
        if alone:
            exports = {"kernel": kernel_export.pickled}
            if program_export is not None and program_key not in self._shared:
                exports["program"] = program_export.pickled  # once per chip
        else:
            assert program_export is not None
            exports = {"program": program_export.pickled}
        compiled = xla_gpu.compile_exports(chip, exports, ("kernel",) if alone else ("program",))
        if compiled.error:
            kind = "unavailable" if "pip install" in compiled.error else "compile"
            raise LoweringFailedError(
                LoweringError(
                    _first_lines(compiled.error), kernel.source, detail=compiled.error, kind=kind
                )
            )
        if "program" in compiled.jobs:
            self._shared[program_key] = compiled.jobs["program"]
        program_job = self._shared.get(program_key)
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

    # -- the whole program ---------------------------------------------------------

    def _stablehlo(self, target: Target) -> Lowered:
        program = self._program
        flat_fn = program.flat_fn
        if flat_fn is None:
            raise LoweringFailedError(
                LoweringError(
                    "no single program was traced (the cell ran its kernels without a call "
                    "on the magic line): name one, as in %%kernel add(x, y), to see its "
                    "StableHLO.",
                    kind="usage",
                )
            )
        args = [jax.ShapeDtypeStruct(jax.numpy.shape(a), a.dtype) for a in program.example_args]
        platform = target.arch or None
        jax_adapter.install_cpu_interpret()
        notes: tuple[str, ...] = ()

        def lower(mosaic_gpu: bool | None) -> str:
            # The program is traced again: off a TPU, for the chosen chip.
            with jax_adapter.auto_interpret(True), chips.tracing_chip():
                module = jax_adapter.lower_module(
                    flat_fn,
                    args,
                    platform,
                    mosaic_gpu=mosaic_gpu,
                    tpu_generation=DEFAULT_TPU_CHIP if platform == "tpu" else None,
                )
            return sourcemap.elide_long_strings(jax_adapter.module_text(module))

        try:
            raw = lower(None)
        except Exception as error:
            explained = explain(error, None, platform or "", None)
            if platform != "cuda":
                raise LoweringFailedError(explained) from None
            # JAX's default GPU backend (Mosaic GPU) cannot take every kernel that the
            # Triton backend can: show the program as the Triton backend lowers it.
            try:
                raw = lower(False)
            except Exception:
                raise LoweringFailedError(explained) from None
            notes = (
                "JAX's default GPU backend (Mosaic GPU) could not take a kernel "
                f"({explained.message}); shown with the Triton backend "
                "(jax_pallas_use_mosaic_gpu=False).",
            )
        return self._finish(target, None, raw, notes=notes)


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


# ---------------------------------------------------------------------------
# Resources.


def gpu_resources(build: triton_build.TritonBuild) -> GpuResources:
    """Registers, spills, shared memory and occupancy of one Triton compile."""
    figures = triton_build.ptxas_figures(build.ptxas_log)
    usage = build.resource_usage
    registers = figures.get("registers", usage.get("REG"))
    shared = build.shared_bytes + figures.get("static_shared", usage.get("SHARED", 0))
    occupancies = tuple(
        occupancy(
            gpu,
            num_warps=build.num_warps,
            registers_per_thread=registers or 0,
            shared_bytes=shared,
            compiled_arch=build.arch,
        )
        for gpu in hardware.GPUS.values()
    )
    return GpuResources(
        arch=build.arch,
        num_warps=build.num_warps,
        num_stages=build.num_stages,
        registers_per_thread=registers,
        spill_store_bytes=figures.get("spill_stores"),
        spill_load_bytes=figures.get("spill_loads"),
        local_bytes=usage.get("LOCAL"),
        stack_bytes=figures.get("stack", usage.get("STACK")),
        shared_bytes=shared,
        occupancy=occupancies,
    )


def tpu_resources(
    kernel: Kernel,
    chip: str,
    problems: Sequence[Any],
    **compiled: Any,
) -> TpuResources:
    """VMEM use against the chip's, tiling problems, and compile figures if any."""
    return TpuResources(
        chip=chip,
        vmem_blocks=tuple(tpu_rules.vmem_blocks(kernel)),
        vmem_capacity=hardware.tpu(chip).vmem_per_core,
        tiling_problems=tuple(problems),
        **compiled,
    )


# ---------------------------------------------------------------------------
# Errors.


def tiling_error(problems: Sequence[Any], detail: str = "") -> LoweringError:
    """One error for the blocks that break the (8, 128) rule, at the first's BlockSpec."""
    first = problems[0]
    message = " ".join(p.message for p in problems)
    return LoweringError(f"{message} {first.hint}", first.location, detail=detail, kind="tiling")


_TILING = "requires that the last two dimensions of your block shape"
_PARAMS = re.compile(r"Compiler params for platform (\w+) cannot be used for (\w+) lowering")


def explain(
    error: BaseException, kernel: Kernel | None, platform: str, chip: str | None
) -> LoweringError:
    """A JAX lowering exception as a `LoweringError` pointing at the kernel's line."""
    text = str(error).strip()
    location = jax_adapter.lowering_error_location(error.__traceback__)
    primitive = jax_adapter.lowering_error_primitive(error.__traceback__)
    where = "TPU " + chip if chip else {"cuda": "GPU", "tpu": "TPU"}.get(platform, "this machine")
    name = f"'{kernel.name}'" if kernel else "a kernel of the program"
    if params := _PARAMS.search(text):
        backend = {"tpu": "pltpu.CompilerParams (Mosaic TPU)", "gpu": "GPU compiler params"}
        chosen = backend.get(params.group(1), params.group(1))
        message = f"{name} passes {chosen}: {where} targets cannot take it."
        return LoweringError(message, _site(kernel), detail=text)
    if _TILING in text:
        message = _first_lines(text, 1)
        return LoweringError(message, _site(kernel), detail=text, kind="tiling")
    summary = _first_lines(text) or "(no message)"
    if primitive and primitive not in ("pallas_call", *jax_adapter.MESH_KERNELS):
        summary = f"{summary} (while lowering '{primitive}')"
    message = f"{name} cannot be lowered for {where}: {type(error).__name__}: {summary}"
    return LoweringError(
        message,
        location or _location_in_text(text, kernel) or _site(kernel),
        detail=text,
    )


_LAYOUTS = "Failed to infer a possible set of layouts"


def mosaic_gpu_layout_hint(error: LoweringError, kernel: Kernel) -> LoweringError:
    """Says why Mosaic GPU found no layout, when its default lowering is the cause.

    From jax 0.11 Mosaic GPU lowers with warpgroup semantics unless a kernel asks
    otherwise, and kernels that lowered with jax 0.10's lane semantics can fail here.
    """
    chose = any(name == "lowering_semantics" for name, _ in kernel.compiler_params)
    if _LAYOUTS not in error.message or chose:
        return error
    if jax_adapter.mosaic_gpu_default_semantics() != "Warpgroup":
        return error
    hint = (
        f" jax {jax.__version__} lowers Mosaic GPU kernels with warpgroup semantics unless "
        "they ask otherwise (from jax 0.11; 0.10 used lane semantics): every array is laid "
        "out over a warpgroup's 128 threads, and this kernel's arrays could not be (arrays "
        "smaller than a warpgroup are a usual cause). "
        "plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane) selects "
        "jax 0.10's lowering, whose error may say more."
    )
    return dataclasses.replace(error, message=error.message + hint)


def _site(kernel: Kernel | None) -> SourceLocation | None:
    if kernel is None:
        return None
    return kernel.call_site or kernel.source


_FILE_LINE = re.compile(r'"?([^\s":()]+\.py|<[^>]+>)"?:(\d+)')


def _location_in_text(text: str, kernel: Kernel | None) -> SourceLocation | None:
    """A `file:line` (or MLIR `"file":line:col`) in a message naming the kernel's file."""
    wanted = _kernel_file(kernel)
    fallback = None
    for match in _FILE_LINE.finditer(text):
        location = SourceLocation(match.group(1), int(match.group(2)))
        if wanted and match.group(1) == wanted:
            return location
        if not sources.is_internal_file(location.file):  # never JAX's own lines
            fallback = fallback or location
    return fallback if not wanted else None


def _first_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[:count])


def _strip_status(text: str) -> str:
    return re.sub(r"^(\w+Error: )?(INTERNAL|INVALID_ARGUMENT|UNIMPLEMENTED): ", "", text)


def _stage(name: str, raw: str, language: str, default_file: str) -> Stage:
    text, source_map = sourcemap.clean(raw, language, default_file)
    return Stage(name, text, language, sourcemap.readable(source_map))


def _kernel_file(kernel: Kernel | None) -> str:
    return kernel.source.file if kernel and kernel.source else ""


def _with_seconds(lowered: Lowered, seconds: float) -> Lowered:
    return dataclasses.replace(lowered, seconds=seconds)


# ---------------------------------------------------------------------------
# One Lowerer per traced program.

_LOWERERS: dict[int, Lowerer] = {}


def lowerer_for(program: Program) -> Lowerer:
    """The program's lowerer (and cache), made on first use, dropped with the program."""
    key = id(program)
    found = _LOWERERS.get(key)
    if found is None:
        found = _LOWERERS[key] = Lowerer(program)
        weakref.finalize(program, _LOWERERS.pop, key, None)
    return found


# Targets that take a mesh kernel, by the backend of its mesh.
_MESH_TARGETS = {
    "mosaic_gpu": ("mosaic-gpu", "xla-gpu"),
    "mosaic_tpu": ("mosaic-tpu", "tpu-compile"),
}
# Targets that take a chip after a colon.
_CHIP_TARGETS = ("xla-gpu",)


def _check_mesh_target(kernel: Kernel, target: Target) -> None:
    """A mesh kernel lowers only for its mesh's backend (a TPU mesh is no GPU's)."""
    allowed = _MESH_TARGETS.get(kernel.backend)
    if allowed is None or target.kind in allowed:
        return
    what = "a Mosaic GPU kernel" if kernel.backend == "mosaic_gpu" else "a TPU kernel"
    names = " and ".join(f"'{t}:<chip>'" if t in _CHIP_TARGETS else f"'{t}'" for t in allowed)
    plural = "targets take" if len(allowed) > 1 else "target takes"
    raise LoweringFailedError(
        LoweringError(
            f"'{kernel.name}' is {what} ({kernel.kind} on a "
            f"{'GPU' if kernel.backend == 'mosaic_gpu' else 'TPU'} mesh): only the "
            f"{names} {plural} it.",
            kernel.call_site or kernel.source,
        )
    )


def _check_tiling(kernel: Kernel) -> None:
    """Stops at the (8, 128) rule before compiling: the BlockSpec line says more than Mosaic."""
    problems = tpu_rules.tiling_problems(kernel)
    if problems:
        raise LoweringFailedError(tiling_error(problems))
