"""The grid a kernel's programs run over: its schedule, and index arrays over it.

A schedule is how programs run: "tpu" one after another in row-major order (last grid
axis fastest), skipping the copy when consecutive programs use the same block; "gpu"
all in parallel, each moving its own blocks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

import numpy as np

from pallaslab._src.records import Kernel

Schedule = Literal["tpu", "gpu"]
SCHEDULES: tuple[Schedule, ...] = ("tpu", "gpu")


def schedule_of(kernel: Kernel, hint: str = "") -> Schedule:
    """The schedule a kernel's programs run in: from its backend, else from `hint`.

    Triton and Mosaic GPU kernels run on GPUs; Mosaic TPU kernels on TPUs. A kernel
    that names no backend runs where JAX runs it: `hint` ("gpu", "cuda", "rocm",
    "tpu", "cpu"); without one, the TPU's sequential grid, which is also the
    semantics of Pallas' interpret mode.
    """
    if kernel.backend in ("triton", "mosaic_gpu") or kernel.kind == "plgpu.kernel":
        return "gpu"
    if kernel.backend == "mosaic_tpu" or kernel.dimension_semantics:
        return "tpu"
    return "gpu" if hint in ("gpu", "cuda", "rocm") else "tpu"


def open_grid(grid: Sequence[int], axes: Collection[int] | None = None) -> list[np.ndarray]:
    """One index array per grid axis, shaped to broadcast against the others.

    With `axes`, only those axes are enumerated; the others hold index 0 (size 1),
    for expressions that do not read them: a grid of 2**40 programs costs nothing
    along the axes an index map ignores.
    """
    rank = len(grid)
    return [
        np.arange(n, dtype=np.int64).reshape([n if a == k else 1 for a in range(rank)])
        if axes is None or k in axes
        else np.zeros((1,) * rank, dtype=np.int64)
        for k, n in enumerate(grid)
    ]


def compact(values: np.ndarray) -> np.ndarray:
    """`values` with every grid axis it does not vary along shrunk to size 1."""
    array = np.asarray(values)
    for axis in range(array.ndim):
        if array.shape[axis] == 1:
            continue
        first = array[(slice(None),) * axis + (slice(0, 1),)]
        if array.strides[axis] == 0 or bool(np.all(array == first)):
            array = first
    return np.array(array)  # a compact copy (ascontiguousarray would make 0-d arrays 1-d)
