"""Running a kernel a test suite lowered again, in one of JAX's own interpreters.

`pytest --pallaslab` checks the kernels pallaslab's emulator does not model (Mosaic GPU
kernels; TPU kernels with DMAs or semaphores, or over a TPU mesh) by running them
again on the operands the test gave them, in the interpreter JAX has for them, with
its race detector on: JAX's Mosaic GPU interpreter (`InterpretGPUParams`) or Pallas'
TPU interpreter (`InterpretParams`). The test's own choices (threads, cores, DMA
order ...) are kept; only what the check needs is set: races detected and reported
(not raised), out-of-bounds reads raised or read as uninitialised, and what fills
fresh memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pallaslab._src.core.jax_adapter import gpu_interpret, observe, probes
from pallaslab._src.core.jax_adapter.emulation import interpret_kind

MOSAIC_GPU = "mosaic_gpu"
TPU = "tpu"
# Where each interpreter's params live, and the primitive modules a rerun binds.
_TPU_PARAMS_MODULE = "jax._src.pallas.mosaic.interpret.params"
_PRIMITIVES = {
    "pallas_call": ("jax._src.pallas.pallas_call", "pallas_call_p"),
    "mpmd_map": ("jax._src.pallas.mpmd", "mpmd_map_p"),
}


def tpu_params_class() -> Any:
    """Pallas' TPU interpreter's `InterpretParams`, or None where this JAX lacks it."""
    return getattr(probes.optional_module(_TPU_PARAMS_MODULE), "InterpretParams", None)


def interpreter_of(lowered: observe.LoweredKernel) -> str:
    """Which of JAX's interpreters a test ran the kernel in: MOSAIC_GPU, TPU or ""."""
    mesh = observe.lowered_mesh(lowered)
    kind = interpret_kind(lowered.params.get("interpret"))
    if mesh == "mosaic_tpu":
        return TPU
    if mesh == "mosaic_gpu" or lowered.primitive == "mpmd_map" or kind == "InterpretGPUParams":
        return MOSAIC_GPU  # `plgpu.kernel` (an `mpmd_map` in jax 0.10) says no mesh
    return TPU if kind == "InterpretParams" else ""


def unavailable(interpreter: str) -> str:
    """Why this JAX cannot run the interpreter ("" when it can)."""
    if interpreter == MOSAIC_GPU:
        return gpu_interpret.unavailable() or ""
    if tpu_params_class() is None:
        return "this JAX has no Pallas TPU interpreter (InterpretParams)"
    return ""


def detects_races(interpreter: str) -> bool:
    """Whether this JAX's interpreter has a race detector."""
    cls = _params_class(interpreter)
    return cls is not None and "detect_races" in {f.name for f in dataclasses.fields(cls)}


def _params_class(interpreter: str) -> Any:
    return gpu_interpret.params_class() if interpreter == MOSAIC_GPU else tpu_params_class()


def interpret_params(
    lowered: observe.LoweredKernel,
    interpreter: str,
    *,
    detect_races: bool,
    out_of_bounds_reads: str = "raise",
    uninitialized_memory: str = "nan",
) -> Any:
    """The interpreter's params for a rerun: the test's own, with what a check needs.

    Raises:
        NotImplementedError: Where this JAX lacks the interpreter.
    """
    cls = _params_class(interpreter)
    if cls is None:
        raise NotImplementedError(unavailable(interpreter))
    if interpreter == MOSAIC_GPU:
        gpu_interpret.install_guard()  # against hung threads, once
    chosen = gpu_interpret.checking_options(
        cls,
        detect_races=detect_races,
        out_of_bounds_reads=out_of_bounds_reads,
        uninitialized_memory=uninitialized_memory,
    )
    original = lowered.params.get("interpret")
    if isinstance(original, cls):
        return dataclasses.replace(original, **chosen)
    return cls(**chosen)


def asked_otherwise(lowered: observe.LoweredKernel) -> list[str]:
    """What the test asked its interpreter to compute differently (skipped float work)."""
    original = lowered.params.get("interpret")
    asked = []
    if getattr(original, "skip_floating_point_ops", False):
        asked.append("skip floating-point operations")
    return asked


def rerun(
    lowered: observe.LoweredKernel, operands: Sequence[np.ndarray], interpret: Any
) -> list[np.ndarray]:
    """Runs the kernel again, as lowered, with `interpret` as its interpreter's params."""
    module_name, attribute = _PRIMITIVES.get(lowered.primitive, ("", ""))
    primitive = (
        getattr(probes.optional_module(module_name), attribute, None) if module_name else None
    )
    if primitive is None:
        raise NotImplementedError(f"cannot run a {lowered.primitive} again on this JAX")
    params = dict(lowered.params, interpret=interpret)
    arguments = [jnp.asarray(operand) for operand in operands]
    mesh = lowered.abstract_mesh
    # Under the abstract mesh the test set (a chip: padded TPU buffers follow its tiles).
    scope = jax.sharding.use_abstract_mesh(mesh) if mesh is not None else contextlib.nullcontext()
    with scope:
        outputs = primitive.bind(*arguments, **params)
        return [np.asarray(output) for output in outputs]


def reset(interpreter: str) -> None:
    """Resets the interpreter's shared state (needed after an exception inside it)."""
    if interpreter == MOSAIC_GPU:
        gpu_interpret.reset_gpu_interpreter()
        return
    module = probes.optional_module("jax._src.pallas.mosaic.interpret.interpret_pallas_call")
    reset_state = getattr(module, "reset_tpu_interpret_mode_state", None)
    if callable(reset_state):
        reset_state()
