"""The scalar-prefetch values a kernel receives, for the inputs of a run.

Index maps that read scalar-prefetch operands (`order[i]`) need their values to say
which block a program sees: tile maps, races, the block pre-check and mismatch
heatmaps all ask here. The values come from evaluating the program up to the kernel
on its inputs; `jax.ShapeDtypeStruct` inputs become the seeded arrays a run uses.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.core import chips, jax_adapter, running
from pallaslab._src.core.inspection import Program

# Past this much input data, the program is not evaluated up to a kernel on its
# example arguments (it would allocate it all): what depends on it stays unknown.
MAX_INPUT_BYTES = 64 * 1024 * 1024

# Per program (by id, dropped with it): the values for its example arguments.
_EXAMPLES: dict[int, dict[int, tuple[np.ndarray, ...]]] = {}


def example_inputs(program: Program) -> list[Any] | None:
    """The program's example arguments as a run takes them, or None when too large."""
    size = sum(
        math.prod(np.shape(a)) * np.dtype(a.dtype).itemsize
        for a in program.example_args
        if hasattr(a, "dtype")
    )
    if size > MAX_INPUT_BYTES:
        return None
    return running.example_arrays(program.example_args)


def prefetch_values(
    program: Program | None, kernel_index: int, leaves: Sequence[Any] | None = None
) -> tuple[np.ndarray, ...]:
    """The scalar-prefetch values kernel `kernel_index` receives.

    Args:
        program: The traced program (None for records built by hand: no values).
        kernel_index: The kernel's index in the program.
        leaves: The program's traced inputs; shapes among them become the seeded
            arrays a run uses. None: the example arguments.

    Returns:
        One array per scalar-prefetch operand; () when the kernel has none, and when
        they cannot be known here (the kernel runs inside a loop or a branch, was
        recorded while a cell ran, or its inputs are too large to make up).
    """
    if program is None or not 0 <= kernel_index < len(program.sites):
        return ()
    site = program.sites[kernel_index]
    mapping = site.params.get("grid_mapping")
    if not int(getattr(mapping, "num_index_operands", 0) or 0):
        return ()
    if leaves is None:
        cached = _EXAMPLES.get(id(program))
        if cached is not None and kernel_index in cached:
            return cached[kernel_index]
        inputs = example_inputs(program)
        values = _evaluate(program, site, inputs) if inputs is not None else ()
        if id(program) not in _EXAMPLES:
            _EXAMPLES[id(program)] = {}
            weakref.finalize(program, _EXAMPLES.pop, id(program), None)
        _EXAMPLES[id(program)][kernel_index] = values
        return values
    return _evaluate(program, site, running.example_arrays(leaves))


def _evaluate(
    program: Program, site: jax_adapter.KernelSite, inputs: Sequence[Any]
) -> tuple[np.ndarray, ...]:
    # Kernels before this one run too (interpreted on CPU); a program that cannot be
    # evaluated this way gives no values, which callers report as unknown.
    jax_adapter.install_cpu_interpret()
    with jax_adapter.auto_interpret(), chips.tracing_chip():
        return tuple(np.asarray(v) for v in jax_adapter.prefetch_values(site, program, inputs))
