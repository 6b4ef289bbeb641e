"""GPU kernel times measured on the device, through the CUPTI hooks JAX ships.

JAX has no public CUDA-event API. Its Mosaic GPU extension exposes CUPTI (the
profiling interface Nsight uses): `_cupti_init()` starts recording every kernel
launched, `_cupti_get_timings(finalize)` returns `[(kernel name, milliseconds)]`.
`jax.experimental.mosaic.gpu.profiler.measure` is built on the same two calls, but
runs its own warm-up call inside, which would refill the L2 cache we flush between
repetitions, so pallaslab calls them directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

try:
    from jax._src.lib import mosaic_gpu as _mosaic_gpu_lib
except ImportError:  # CPU-only jaxlib, or no CUDA plugin: no device-side timer
    _mosaic_gpu_lib = None  # type: ignore[assignment]

_NOTICE = (
    "device-side kernel timing needs JAX's Mosaic GPU extension with CUPTI "
    "(jax._src.lib.mosaic_gpu._mosaic_gpu_ext._cupti_init / _cupti_get_timings)"
)


def _extension() -> Any:
    ext = getattr(_mosaic_gpu_lib, "_mosaic_gpu_ext", None)
    if ext is None or not all(hasattr(ext, n) for n in ("_cupti_init", "_cupti_get_timings")):
        return None
    return ext


def kernel_timer_notice() -> str | None:
    """None when device-side kernel timing is available, else why it is not."""
    return None if _extension() is not None else _NOTICE


@contextlib.contextmanager
def kernel_times() -> Iterator[list[tuple[str, float]]]:
    """Records every GPU kernel launched in the block.

    Yields a list that is filled, when the block ends, with `(kernel name,
    milliseconds)` in launch order. Work launched in the block must be finished
    (`block_until_ready`) before it ends.

    Raises:
        RuntimeError: When CUPTI is not available (see `kernel_timer_notice`).
    """
    ext = _extension()
    if ext is None:
        raise RuntimeError(_NOTICE)
    times: list[tuple[str, float]] = []
    ext._cupti_init()
    try:
        yield times
    finally:
        # finalize=True detaches CUPTI, so profilers the user runs later still work.
        times.extend((str(name), float(ms)) for name, ms in ext._cupti_get_timings(True) or ())
