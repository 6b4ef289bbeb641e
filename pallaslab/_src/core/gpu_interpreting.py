"""Mosaic GPU kernels run on a CPU by JAX's interpreter: what it reports, as findings.

On a CPU, Mosaic GPU kernels (`plgpu.kernel`, `pl.kernel` / `pl.core_map` on a GPU
mesh, a `pallas_call` with Mosaic GPU compiler params taking whole arrays) run in JAX's
Mosaic GPU interpreter (`jax_adapter.gpu_interpret`), chosen as they are bound. Its
race detector's reports become `InterpreterRace` records at the kernel's source lines,
and an out-of-bounds read it stopped an `OutOfBounds` finding (the run is made again
with such reads giving NaN, so it still has outputs), as the emulator's checks do.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator, Sequence

import jax

from pallaslab._src.core import jax_adapter
from pallaslab._src.records import InterpreterRace, Kernel, OutOfBounds, SourceLocation


def runs_mosaic_gpu(sites: Sequence[jax_adapter.KernelSite]) -> bool:
    """Whether a program run here would hand kernels to the Mosaic GPU interpreter."""
    return jax.default_backend() == "cpu" and any(
        jax_adapter.site_backend(site) == "mosaic_gpu" for site in sites
    )


@contextlib.contextmanager
def capture(enabled: bool) -> Iterator[list[tuple[jax_adapter.GpuRaceAccess, ...]]]:
    """Collects the interpreter's race reports in the block (when `enabled`)."""
    if not enabled:
        yield []
        return
    with jax_adapter.race_capture() as found:
        yield found  # type: ignore[misc]


def recover(error: BaseException) -> jax_adapter.OutOfBoundsAccess | None:
    """Resets the interpreter after `error`; the out-of-bounds read that stopped it, if any.

    A run with such reads giving NaN can go on; None: the error stands.
    """
    found = jax_adapter.interpreter_out_of_bounds(error)
    jax_adapter.reset_gpu_interpreter()
    if found is None or found.access != "load":
        return None  # what failed is kept, to explain the error
    jax_adapter.forget_failures()  # the run is made again
    return found


def races(
    reported: Sequence[tuple[jax_adapter.GpuRaceAccess, ...]], kernels: Sequence[Kernel]
) -> tuple[InterpreterRace, ...]:
    """The reported races as records, one per pair of source lines, with their kernel."""
    counts: collections.Counter[tuple[object, ...]] = collections.Counter()
    first: dict[tuple[object, ...], tuple[jax_adapter.GpuRaceAccess, ...]] = {}
    for pair in reported:
        a, b = pair[0], pair[1]
        # One race, whichever of its two accesses came first.
        sides = sorted([(a.access, _line(a.location)), (b.access, _line(b.location))])
        key: tuple[object, ...] = (a.memory, *sides)
        counts[key] += 1
        first.setdefault(key, pair)
    found = []
    for key, pair in first.items():
        a, b = pair[0], pair[1]
        kernel = kernel_at(kernels, a.location) or kernel_at(kernels, b.location)
        found.append(
            InterpreterRace(
                kernel=kernel.name if kernel else "kernel",
                kernel_index=kernel.index if kernel else 0,
                memory=a.memory or b.memory,
                accesses=(a.access, b.access),
                threads=(a.thread, b.thread),
                location=a.location,
                other_location=b.location,
                count=counts[key],
            )
        )
    return tuple(found)


def out_of_bounds(access: jax_adapter.OutOfBoundsAccess, kernels: Sequence[Kernel]) -> OutOfBounds:
    """An out-of-bounds access the interpreter stopped, as the emulator's finding."""
    kernel = kernel_at(kernels, access.location) or next(
        (k for k in kernels if k.backend == "mosaic_gpu"), None
    )
    memory = f"a {access.memory} buffer" if access.memory else "a buffer"
    return OutOfBounds(
        kernel=kernel.name if kernel else "kernel",
        kernel_index=kernel.index if kernel else 0,
        ref=memory,
        access=access.access,
        cause="interpreter",
        shape=access.shape,
        span=access.span,
        programs=(),
        program_count=0,
        location=access.location,
    )


def failure_line(error: BaseException, kernel: Kernel) -> SourceLocation | None:
    """The kernel's line to blame for `error` from the interpreter, where JAX names none.

    An out-of-bounds store reports no line (jax 0.10 fails an assertion; 0.12 raises
    without the store's stack): when the kernel stores from one source line only, that
    line. Else the kernel's definition.
    """
    found = jax_adapter.interpreter_out_of_bounds(error)
    if found is not None and found.access == "store" and found.location is None:
        stores = {
            (file, line)
            for text_line, file, line in kernel.jaxpr_source_map
            if _is_store(_line_text(kernel.jaxpr, text_line))
        }
        if len(stores) == 1:
            ((file, line),) = stores
            return SourceLocation(file, line)
    return kernel.source


def _line_text(text: str, number: int) -> str:
    lines = text.splitlines()
    return lines[number - 1] if 0 < number <= len(lines) else ""


def _is_store(jaxpr_line: str) -> bool:
    """A ref store as jaxprs print it: `old, ref[i:i+64] <- ref[i:i+64], value`."""
    target, arrow, _ = jaxpr_line.partition(" <- ")
    return bool(arrow) and "[" in target.split(",")[-1]


def kernel_at(kernels: Sequence[Kernel], location: SourceLocation | None) -> Kernel | None:
    """The kernel whose body has a line at `location` (its jaxpr's source map)."""
    if location is None:
        return None
    for kernel in kernels:
        if any(
            file == location.file and line == location.line
            for _, file, line in kernel.jaxpr_source_map
        ):
            return kernel
    return None


def _line(location: SourceLocation | None) -> tuple[str, int]:
    return (location.file, location.line) if location is not None else ("", 0)
