"""What every target's lowering shares: the program, results shared between targets, finishing.

`LoweringContext` holds the traced program (weakly) and the intermediate results that
several targets use (a kernel's lowered payload, its site traced for a TPU chip),
and turns a compiler's text into a `Lowered`. `engine.Lowerer` adds the cache of
finished lowerings and the dispatch to `targets/`, whose modules take a context.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import jax

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.lowering import sourcemap
from pallaslab._src.core.lowering.failures import LoweringFailedError, explain, kernel_file
from pallaslab._src.core.lowering.headers import header
from pallaslab._src.records import Kernel, hardware
from pallaslab._src.records.lowered import GpuResources, Lowered, LoweringError, Stage, TpuResources
from pallaslab._src.records.targets import Target

if TYPE_CHECKING:
    from pallaslab._src.core.program import Program

T = TypeVar("T")


class LoweringContext:
    """The program being lowered, the results shared between targets, and finishing."""

    def __init__(self, program: Program) -> None:
        # Weak: the lowerer lives as long as the program, and must not keep it alive.
        self._program_ref = weakref.ref(program)
        # Intermediate results shared between targets (see `share`).
        self.shared: dict[tuple[Any, ...], Any] = {}
        # Held while this process traces, lowers or exports with JAX; compile workers
        # (libtpu, XLA's GPU compile) run outside it, several at once.
        self.jax_lock = threading.RLock()

    @property
    def program(self) -> Program:
        """The traced program lowered."""
        program = self._program_ref()
        if program is None:  # pragma: no cover - the program owns its lowerer
            raise ReferenceError("the traced program is gone")
        return program

    def share(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """`make()` once per key; the kernel's failure is remembered and raised again.

        A failure that was not the kernel's (`LoweringError.transient`: a tool missing
        or crashed) is raised, not remembered: the next request makes it again.
        """
        if key not in self.shared:
            try:
                self.shared[key] = make()
            except LoweringFailedError as failed:
                if failed.error.transient:
                    raise
                self.shared[key] = failed
        value = self.shared[key]
        if isinstance(value, LoweringFailedError):
            raise value
        return value  # type: ignore[no-any-return]

    def header(self, target: Target, kernel: Kernel | None) -> str:
        """The line saying what made the kernel's (None: the program's) lowering."""
        what = f"kernel {kernel.name}" if kernel else f"program {self.program.name}"
        return header(target, what)

    def example_avals(self) -> list[jax.ShapeDtypeStruct]:
        """The program's example arguments as shapes and dtypes, to lower it on."""
        return [
            jax.ShapeDtypeStruct(jax.numpy.shape(a), a.dtype) for a in self.program.example_args
        ]

    def site(self, kernel: Kernel, chip: str | None) -> jax_adapter.KernelSite:
        """The kernel as bound in the program, traced for `chip` when it is a TPU's.

        A kernel may ask which TPU it is on while it is traced (`emit_pipeline`'s
        tiling, `pltpu.get_tpu_info()` in the body): for a TPU target the program is
        traced again as if on that chip, once per chip, from the inspection's snapshot
        (the function with the globals it read pinned as they were, never as a later
        cell left them). A GPU kernel that asked the GPU (its SM count ...) is traced
        again for another GPU (`chip` "B200"). Where that cannot be done (no single
        program, or it traces to other kernels), the inspected kernel is used.
        """
        program = self.program
        site = program.sites[kernel.index]
        fn = program.retrace_fn
        if chip is None or fn is None or not program.example_args:
            return site
        if chip in hardware.GPUS and program.chip.gpu in ("", chip):
            # It asked the GPU nothing (the same kernel on every GPU), or was traced for it.
            return site

        def retrace() -> tuple[jax_adapter.KernelSite, ...]:
            try:
                return tuple(jax_adapter.sites_on_chip(fn, self.example_avals(), chip))
            except Exception:  # the inspected trace stands
                return ()

        sites = self.share(("chip-sites", chip), retrace)
        if len(sites) != len(program.sites):
            return site
        found = sites[kernel.index]
        if found.primitive != site.primitive or found.in_avals != site.in_avals:
            return site
        return found

    def payload(
        self,
        kernel: Kernel,
        platform: str,
        *,
        mosaic_gpu: bool | None = None,
        chip: str | None = None,
    ) -> jax_adapter.KernelPayload:
        """The kernel alone lowered for `platform` (and TPU or GPU `chip`): its module.

        For CUDA, by default for the GPU the program was traced for.
        """
        gpu = (chip or self.program.chip.gpu or None) if platform == "cuda" else None

        def make() -> jax_adapter.KernelPayload:
            site = self.site(kernel, gpu if platform == "cuda" else chip)
            try:
                function = jax_adapter.kernel_function(site)
                with jax_adapter.deprecation_notices() as notices:
                    module = jax_adapter.lower_module(
                        function,
                        jax_adapter.kernel_avals(site),
                        platform,
                        mosaic_gpu=mosaic_gpu,
                        tpu_generation=chip if platform == "tpu" else None,
                        gpu_device_kind=hardware.gpu(gpu).device_kind if gpu else None,
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

        return self.share(("payload", kernel.index, platform, mosaic_gpu, chip, gpu), make)

    def finish(
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
        """A compiler's `raw` text as a `Lowered`: cleaned, linked to the source."""
        language = language or target.language
        text, source_map = sourcemap.clean(raw, language, kernel_file(kernel))
        source_map = sourcemap.readable(source_map)
        return Lowered(
            target=target.name,
            kernel=kernel.name if kernel else "",
            kernel_index=kernel.index if kernel else None,
            language=language,
            header=header or self.header(target, kernel),
            text=text,
            source_map=source_map,
            raw_text=raw,
            resources=resources,
            stages=stages,
            notes=notes,
        )
