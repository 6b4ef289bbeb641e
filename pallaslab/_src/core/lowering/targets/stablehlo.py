"""The `stablehlo` targets: the whole traced program's StableHLO, for this machine or a platform."""

from __future__ import annotations

from pallaslab._src.core import chips, emulator, jax_adapter
from pallaslab._src.core.lowering import sourcemap
from pallaslab._src.core.lowering.context import LoweringContext
from pallaslab._src.core.lowering.failures import LoweringFailedError, explain
from pallaslab._src.records.lowered import Lowered, LoweringError
from pallaslab._src.records.targets import DEFAULT_TPU_CHIP, Target


def lower(lowerer: LoweringContext, target: Target) -> Lowered:
    """The program lowered for the target's platform; on CUDA, Triton when Mosaic GPU fails."""
    flat_fn = lowerer.program.lowering_fn
    if flat_fn is None:
        raise LoweringFailedError(
            LoweringError(
                "no single program was traced (the cell ran its kernels without a call "
                "on the magic line): name one, as in %%kernel add(x, y), to see its "
                "StableHLO.",
                kind="usage",
            )
        )
    args = lowerer.example_avals()
    platform = target.arch or None
    # On a CPU, kernels lower as they run there: emulated, whatever was imported before.
    emulator.install()
    notes: tuple[str, ...] = ()

    def lower_with(mosaic_gpu: bool | None) -> str:
        # The program is traced again: off a TPU, for the chosen chip.
        with jax_adapter.auto_interpret(True), chips.tracing_chip(lowerer.program.chip):
            module = jax_adapter.lower_module(
                flat_fn,
                args,
                platform,
                mosaic_gpu=mosaic_gpu,
                tpu_generation=DEFAULT_TPU_CHIP if platform == "tpu" else None,
            )
        return sourcemap.elide_long_strings(jax_adapter.module_text(module))

    try:
        raw = lower_with(None)
    except Exception as error:
        explained = explain(error, None, platform or "", None)
        if platform != "cuda":
            raise LoweringFailedError(explained) from None
        # JAX's default GPU backend (Mosaic GPU) cannot take every kernel that the
        # Triton backend can: show the program as the Triton backend lowers it.
        try:
            raw = lower_with(False)
        except Exception:
            raise LoweringFailedError(explained) from None
        notes = (
            "JAX's default GPU backend (Mosaic GPU) could not take a kernel "
            f"({explained.message}); shown with the Triton backend "
            "(jax_pallas_use_mosaic_gpu=False).",
        )
    return lowerer.finish(target, None, raw, notes=notes)
