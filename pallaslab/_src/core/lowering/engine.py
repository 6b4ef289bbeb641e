"""Lowering a traced program's kernels for every target, once per kernel and target.

Each kernel is lowered on its own (a function binding just that kernel, on
ShapeDtypeStructs of its operands), so one kernel a target cannot take spoils
nothing else; `stablehlo` targets lower the whole program. Results are cached per
program, keyed by (kernel, target); intermediate results (a kernel's lowered payload,
a Triton compile for one architecture, a TPU export) are shared between targets.
`Lowerer` dispatches on the target's kind to `targets/` (one module a kind); errors
are explained in `failures`, headers written in `headers`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import jax

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.lowering import sourcemap
from pallaslab._src.core.lowering.failures import (
    LoweringFailedError,
    check_mesh_target,
    check_tiling,
    explain,
    kernel_file,
)
from pallaslab._src.core.lowering.headers import header
from pallaslab._src.core.lowering.targets import (
    mosaic_gpu,
    mosaic_tpu,
    stablehlo,
    tpu_compile,
    triton,
    xla_gpu,
)
from pallaslab._src.core.lowering.toolchains import unavailable_reason
from pallaslab._src.records import Kernel
from pallaslab._src.records.lowered import GpuResources, Lowered, LoweringError, Stage, TpuResources
from pallaslab._src.records.targets import Target

if TYPE_CHECKING:
    from pallaslab._src.core.program import Program

T = TypeVar("T")

# The module that lowers each kind of kernel target.
_BY_KIND = {
    "mosaic-gpu": mosaic_gpu.lower,
    "triton": triton.lower,
    "mosaic-tpu": mosaic_tpu.lower,
    "tpu-compile": tpu_compile.lower,
    "xla-gpu": xla_gpu.lower,
}


class Lowerer:
    """Lowers the kernels of one traced program, caching every result."""

    def __init__(self, program: Program) -> None:
        # Weak: the cache lives as long as the program, and must not keep it alive.
        self._program_ref = weakref.ref(program)
        self._results: dict[tuple[int | None, str], Lowered] = {}
        # Intermediate results shared between targets (see `share`).
        self.shared: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.RLock()
        self.order: list[tuple[int | None, str]] = []

    @property
    def program(self) -> Program:
        """The traced program lowered."""
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
                        header=self.header(target, kernel if index is not None else None),
                        text="",
                        error=failed.error,
                    )
                found = dataclasses.replace(found, seconds=time.perf_counter() - started)
                self._results[key] = found
            if key in self.order:
                self.order.remove(key)
            self.order.append(key)
            return found

    def _lower(self, target: Target, kernel: Kernel | None) -> Lowered:
        if target.kind == "tpu-compile" and kernel is not None:
            # The (8, 128) rule needs no libtpu: what is wrong with the kernel comes
            # before what is missing from the machine.
            check_tiling(kernel)
        reason = unavailable_reason(target)
        if reason:
            raise LoweringFailedError(LoweringError(reason, kind="unavailable"))
        if target.program:
            return stablehlo.lower(self, target)
        assert kernel is not None
        if kernel.kind != "pallas_call":
            check_mesh_target(kernel, target)
        if target.kind == "triton" and (notice := jax_adapter.feature_notice("triton-lowering")):
            raise LoweringFailedError(
                LoweringError(
                    f"{notice}: the '{target.name}' target needs it. The 'mosaic-gpu' target "
                    "shows this kernel's GPU lowering.",
                    kind="unavailable",
                )
            )
        if target.kind in ("mosaic-tpu", "tpu-compile") and not jax_adapter.tpu_chip_known(
            target.arch
        ):
            raise LoweringFailedError(
                LoweringError(
                    f"jax {jax.__version__}'s Pallas does not know TPU {target.arch}.",
                    kind="unavailable",
                )
            )
        lower = _BY_KIND.get(target.kind)
        if lower is None:
            raise LoweringFailedError(LoweringError(f"no lowering for {target.name}", kind="usage"))
        return lower(self, target, kernel)

    # -- what the targets share -----------------------------------------------------

    def share(self, key: tuple[Any, ...], make: Callable[[], T]) -> T:
        """`make()` once per key; a failure is remembered and raised again."""
        if key not in self.shared:
            try:
                self.shared[key] = make()
            except LoweringFailedError as failed:
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
        traced again as if on that chip, once per chip. Where that cannot be done (no
        single program, or it traces to other kernels), the inspected kernel is used.
        """
        program = self.program
        site = program.sites[kernel.index]
        fn = program.flat_fn
        if chip is None or fn is None or not program.example_args:
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
        """The kernel alone lowered for `platform` (and TPU `chip`): its backend's module."""

        def make() -> jax_adapter.KernelPayload:
            site = self.site(kernel, chip)
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

        return self.share(("payload", kernel.index, platform, mosaic_gpu, chip), make)

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
