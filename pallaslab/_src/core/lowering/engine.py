"""Lowering a traced program's kernels for every target, once per kernel and target.

Each kernel is lowered on its own (a function binding just that kernel, on
ShapeDtypeStructs of its operands), so one kernel a target cannot take spoils
nothing else; `stablehlo` targets lower the whole program. Results are cached per
program, keyed by (kernel, target); intermediate results (a kernel's lowered payload,
a Triton compile for one architecture, a TPU export) are shared between targets.
`Lowerer` caches and dispatches on the target's kind to `targets/` (one module a
kind); what the targets share (the program, intermediate results, finishing a text
into a `Lowered`) is its base, `context.LoweringContext`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from typing import TYPE_CHECKING

import jax

from pallaslab._src.core import jax_adapter
from pallaslab._src.core.lowering.context import LoweringContext
from pallaslab._src.core.lowering.failures import (
    LoweringFailedError,
    check_mesh_target,
    check_tiling,
)
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
from pallaslab._src.records.lowered import Lowered, LoweringError
from pallaslab._src.records.targets import Target

if TYPE_CHECKING:
    from pallaslab._src.core.program import Program

# The module that lowers each kind of kernel target.
_BY_KIND = {
    "mosaic-gpu": mosaic_gpu.lower,
    "triton": triton.lower,
    "mosaic-tpu": mosaic_tpu.lower,
    "tpu-compile": tpu_compile.lower,
    "xla-gpu": xla_gpu.lower,
}


# Kinds whose compile runs in a worker process: lowered without holding `jax_lock`.
_WORKER_KINDS = frozenset({"tpu-compile", "xla-gpu"})


class Lowerer(LoweringContext):
    """Lowers the kernels of one traced program, caching every result."""

    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self._results: dict[tuple[int | None, str], Lowered] = {}
        self._lock = threading.RLock()
        self._key_locks: dict[tuple[int | None, str], threading.Lock] = {}
        self.order: list[tuple[int | None, str]] = []

    def done(self) -> list[Lowered]:
        """Everything lowered so far, the most recently asked for last."""
        return [self._results[key] for key in self.order]

    def lower(self, target: Target, kernel: Kernel | None) -> Lowered:
        """The kernel (None: the program) lowered for `target`, from the cache if there.

        Each (kernel, target) is lowered once, by one thread; other keys lower at the
        same time (their compile workers in parallel; JAX work under `jax_lock`).
        """
        index = None if target.program or kernel is None else kernel.index
        key = (index, target.name)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                found = self._results.get(key)
                # Successes and the kernel's own failures stand; a tool that was missing
                # or a worker or tool that crashed is asked again.
                if found is not None and found.error is not None and found.error.transient:
                    found = None
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
            with self._lock:
                self._results[key] = found  # under the key's lock: no other lowering of it
                if key in self.order:
                    self.order.remove(key)
                self.order.append(key)
                return found

    def _lower(self, target: Target, kernel: Kernel | None) -> Lowered:
        if target.kind in _WORKER_KINDS:
            # Their modules hold `jax_lock` while they export, not while a worker compiles.
            return self._lower_unlocked(target, kernel)
        with self.jax_lock:
            return self._lower_unlocked(target, kernel)

    def _lower_unlocked(self, target: Target, kernel: Kernel | None) -> Lowered:
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
        if (
            target.kind == "mosaic-gpu"
            and kernel.kind == "pallas_call"
            and kernel.backend != "triton"  # a Triton kernel is told why not, as before
            and (removed := jax_adapter.mosaic_gpu_pallas_call_notice())
        ):
            raise LoweringFailedError(LoweringError(removed, kind="unavailable"))
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
