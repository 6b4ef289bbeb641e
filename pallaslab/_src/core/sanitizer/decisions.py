"""What `pytest --pallaslab` checks, decided before anything runs, with the reason.

Every kernel a test suite lowers gets one decision here, from what it is (never from a
failure): checked by pallaslab's emulator and checks, or not checked, in one sentence
saying why. A kernel the emulator then cannot analyse or run is pallaslab's failure,
counted as such, never turned into a refusal after the fact.

Kernels pallaslab's emulator does not model are checked in the interpreter JAX has
for them (`interpreted.py`): Mosaic GPU kernels (`plgpu.kernel`, GPU meshes, a
`pallas_call` asking for `InterpretGPUParams`) in JAX's Mosaic GPU interpreter, TPU
kernels over a mesh, or with DMAs, semaphores or remote copies, in Pallas' TPU
interpreter; both with their race detectors on. Kernels asking for Pallas' TPU
interpreter otherwise are plain Pallas kernels the emulator models (it runs them in
grid order; the TPU interpreter's own choices, such as several cores, only reorder
what the race checks reorder anyway).
"""

from __future__ import annotations

import math

import numpy as np

from pallaslab._src.core.jax_adapter import interpreted, observe
from pallaslab._src.core.jax_adapter.emulation import interpret_kind

# The interpreters a kernel may ask for (the class name of its params, `interpret=`).
INTERPRETERS = ("plain", "InterpretParams", "InterpretGPUParams")
# Kernels whose compiler params say these backends ("" none) and that the emulator does
# not run (DMAs, semaphores) are checked in Pallas' TPU interpreter: TPU kernels.
TPU_INTERPRETED_BACKENDS = ("mosaic_tpu", "")

# Operands and results copied for a check, per program, at most.
DEFAULT_MAX_BYTES = 256 * 2**20


def refusal(lowered: observe.LoweredKernel, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Why pallaslab does not check this kernel ("" when it does), decided beforehand."""
    mesh = observe.lowered_mesh(lowered)
    interpreter = interpreted.interpreter_of(lowered)
    if interpreter and (missing := interpreted.unavailable(interpreter)):
        return f"not checked: {missing}"
    kind = interpret_kind(lowered.params.get("interpret"))
    if kind and kind not in INTERPRETERS:
        return f"run by JAX's {kind} interpreter, which pallaslab does not model"
    if mesh and not interpreter:
        return "a kernel over a mesh of neither GPU nor TPU cores; not checked by pallaslab"
    if lowered.unreadable:
        return lowered.unreadable
    size = sum(_nbytes(a) for a in (*lowered.in_avals, *lowered.out_avals))
    if size > max_bytes:
        return (
            f"its operands and results take {size / 2**20:.0f} MiB, more than the "
            f"{max_bytes / 2**20:.0f} MiB a check copies (--pallaslab-max-mib)"
        )
    return ""


def _nbytes(aval: object) -> int:
    shape = getattr(aval, "shape", ())
    try:
        itemsize = np.dtype(getattr(aval, "dtype", np.float32)).itemsize
    except TypeError:
        itemsize = 4
    return math.prod(int(d) for d in shape) * itemsize


def comparison_refusal(params: dict[str, object]) -> str:
    """Why the emulator's outputs are not compared with the test's ("" when they are).

    Pallas' TPU interpreter can be asked to compute otherwise than Pallas' interpreter
    (and the emulator, which follows it): on several cores, parallel dimensions in a
    random order, zeros for uninitialized memory, floating-point work skipped. Its
    outputs then differ by design; the kernel is still checked.
    """
    interpret = params.get("interpret")
    if interpret_kind(interpret) != "InterpretParams":
        return ""
    asked = []
    if getattr(interpret, "skip_floating_point_ops", False):
        asked.append("skip floating-point operations")
    if getattr(interpret, "uninitialized_memory", "nan") != "nan":
        asked.append(f"fill uninitialized memory with {interpret.uninitialized_memory}")  # type: ignore[attr-defined]
    if getattr(interpret, "out_of_bounds_reads", "raise") != "raise":
        asked.append("read uninitialized values past a buffer's end")
    if getattr(interpret, "buffer_bounds", "logical") != "logical":
        asked.append("pad buffers to the TPU's tiles")
    cores = int(getattr(interpret, "num_cores_or_threads", 1) or 1)
    if cores > 1:
        asked.append(f"run on {cores} cores")
    if getattr(interpret, "random_seed", None) is not None:
        asked.append("run parallel grid dimensions in a random order")
    if not asked:
        return ""
    return (
        "not compared with the test's result: the test ran it in Pallas' TPU interpreter, "
        f"asked to {_and(asked)}"
    )


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
