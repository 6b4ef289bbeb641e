"""What `pytest --pallaslab` checks, decided before anything runs, with the reason.

Every kernel a test suite lowers gets one decision here, from what it is (never from a
failure): checked by pallaslab's emulator and checks, or not checked, in one sentence
saying why. A kernel the emulator then cannot analyse or run is pallaslab's failure,
counted as such, never turned into a refusal after the fact.

Kernels run by one of JAX's other interpreters are decided per interpreter in
`INTERPRETERS`: the TPU interpreter's kernels are plain Pallas kernels the emulator
models (it runs them in grid order; the TPU interpreter's own choices, such as several
cores, only reorder what the race checks reorder anyway); the Mosaic GPU interpreter's
are not checked yet. Checking those is one change: their entry in `INTERPRETERS`.
"""

from __future__ import annotations

import math

import numpy as np

from pallaslab._src.core.jax_adapter import observe
from pallaslab._src.core.jax_adapter.emulation import interpret_kind

# Kernels run by JAX's Mosaic GPU interpreter (`plgpu.kernel`, GPU meshes, pallas_calls
# asking for `InterpretGPUParams`).
MOSAIC_GPU = "run by JAX's Mosaic GPU interpreter; not checked by pallaslab yet"

# Per interpreter (the class name of its params, `interpret=`): None when the emulator
# checks its kernels, else why they are not checked.
INTERPRETERS: dict[str, str | None] = {
    "InterpretParams": None,  # Pallas' TPU interpreter: plain Pallas kernels
    "InterpretGPUParams": MOSAIC_GPU,
}

# Operands and results copied for a check, per program, at most.
DEFAULT_MAX_BYTES = 256 * 2**20


def refusal(lowered: observe.LoweredKernel, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Why pallaslab does not check this kernel ("" when it does), decided beforehand."""
    mesh = observe.lowered_mesh(lowered)
    if mesh == "mosaic_gpu" or lowered.primitive == "mpmd_map":
        return MOSAIC_GPU
    kind = interpret_kind(lowered.params.get("interpret"))
    if kind in INTERPRETERS and INTERPRETERS[kind] is not None:
        return str(INTERPRETERS[kind])
    if kind and kind not in ("plain", *INTERPRETERS):
        return f"run by JAX's {kind} interpreter, which pallaslab does not model"
    if mesh:
        where = "a TPU mesh (pl.kernel, pl.core_map)" if mesh == "mosaic_tpu" else "a mesh"
        return f"a kernel over {where}, run by Pallas' TPU interpreter; not checked by pallaslab"
    if lowered.readable:
        return lowered.readable
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
