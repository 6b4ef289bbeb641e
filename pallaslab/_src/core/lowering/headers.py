"""The line above each lowering that says what made it: tool, versions and caveats."""

from __future__ import annotations

import jax

from pallaslab._src.core.lowering import tpu_compile, triton_build, xla_gpu_lowering
from pallaslab._src.records.targets import Target

TRITON_NOTE = "XLA's built-in Triton may differ in detail."


def header(target: Target, what: str) -> str:
    """What produced `what` ("kernel add", "program f") for `target`, with versions."""
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
