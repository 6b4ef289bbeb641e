"""What a kernel receives in its program: its operands' values and its scalar prefetch.

Index maps that read scalar-prefetch operands (`order[i]`) need their values to say
which block a program sees (and a grid sized at run time, `grid=(n,)` with `n`
traced, needs its sizes: `sized_kernel`): tile maps, races, the block pre-check and mismatch
heatmaps all ask here. The checks after a run, element-level accesses and reproducers
need every operand's value. Both come from one evaluation of the program up to the
kernel on its inputs (`kernel_inputs`); `jax.ShapeDtypeStruct` inputs become the
seeded arrays a run uses. When the values cannot be known, the reason says why.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.core import chips, jax_adapter
from pallaslab._src.core.program import Program
from pallaslab._src.core.seeded import example_arrays
from pallaslab._src.records import Kernel

# Past this much input data, the program is not evaluated up to a kernel on its
# example arguments (it would allocate it all): what depends on it stays unknown.
MAX_INPUT_BYTES = 64 * 1024 * 1024

# Per program (by id, dropped with it): the prefetch values for its example arguments.
_EXAMPLES: dict[int, dict[int, tuple[np.ndarray, ...]]] = {}


@dataclasses.dataclass(frozen=True)
class KernelInputs:
    """The values one kernel is bound to in its program, or why they are unknown.

    Attributes:
        values: Every input of the kernel in order (dynamic grid bounds, scalar
            prefetch, then the operands); None when unknown.
        offset: Where the scalar-prefetch operands start among `values`.
        reason: Why the values are unknown ("" when known), as a clause: "it runs
            inside a loop or a branch", "its inputs are too large to make up" ...
    """

    values: tuple[Any, ...] | None
    offset: int = 0
    reason: str = ""

    @property
    def operands(self) -> list[Any] | None:
        """The values from the first scalar-prefetch operand on (the kernel's refs)."""
        return None if self.values is None else list(self.values[self.offset :])


def example_inputs(program: Program) -> list[Any] | None:
    """The program's example arguments as a run takes them, or None when too large."""
    size = sum(
        math.prod(np.shape(a)) * np.dtype(a.dtype).itemsize
        for a in program.examples()
        if hasattr(a, "dtype")
    )
    if size > MAX_INPUT_BYTES:
        return None
    return example_arrays(program.examples())


def kernel_inputs(
    program: Program | None,
    kernel_index: int,
    leaves: Sequence[Any] | None = None,
    *,
    interpret_earlier: bool = True,
) -> KernelInputs:
    """The values kernel `kernel_index` is bound to when its program runs on `leaves`.

    Args:
        program: The traced program (None for records built by hand: unknown).
        kernel_index: The kernel's index in the program.
        leaves: The program's traced inputs; shapes among them become the seeded
            arrays a run uses. None: the example arguments.
        interpret_earlier: Run kernels before this one in Pallas' CPU interpreter
            (off inside a run, whose own scope already decides how kernels run).
    """
    if program is None or not 0 <= kernel_index < len(program.sites):
        return KernelInputs(None, reason="no traced program holds this kernel")
    site = program.sites[kernel_index]
    if program.closed_jaxpr is None:
        return KernelInputs(None, reason="it was recorded while a cell ran, not traced in a call")
    inputs = example_inputs(program) if leaves is None else example_arrays(leaves)
    if inputs is None:
        return KernelInputs(None, reason="the program's inputs are too large to make up here")
    offset = jax_adapter.site_prefetch_offset(site)
    try:
        if interpret_earlier:
            # Kernels before this one run too, in interpret mode on CPU.
            jax_adapter.install_cpu_interpret()
            with jax_adapter.auto_interpret(), chips.tracing_chip(program.chip):
                values = jax_adapter.kernel_inputs(site, program, inputs)
        else:
            values = jax_adapter.kernel_inputs(site, program, inputs)
    except Exception as error:  # reported to the caller, which says what it could not do
        return KernelInputs(
            None, offset, f"evaluating the program up to it failed ({messages.one_line(error)})"
        )
    if values is None:
        return KernelInputs(None, offset, "it runs inside a loop or a branch of the program")
    return KernelInputs(tuple(values), offset)


def prefetch_values(
    program: Program | None, kernel_index: int, leaves: Sequence[Any] | None = None
) -> tuple[np.ndarray, ...]:
    """The scalar-prefetch values kernel `kernel_index` receives.

    Args:
        program: The traced program (None for records built by hand: no values).
        kernel_index: The kernel's index in the program.
        leaves: The program's traced inputs; shapes among them become the seeded
            arrays a run uses. None: the example arguments (evaluated once, cached).

    Returns:
        One array per scalar-prefetch operand; () when the kernel has none, and when
        they cannot be known here (`kernel_inputs` says why): then tile maps mark the
        operands whose index maps read them as unmapped, and say so.
    """
    if program is None or not 0 <= kernel_index < len(program.sites):
        return ()
    count = jax_adapter.site_prefetch_count(program.sites[kernel_index])
    if not count:
        return ()
    if leaves is not None:
        return _prefetch_of(kernel_inputs(program, kernel_index, leaves), count)
    cached = _EXAMPLES.get(id(program))
    if cached is not None and kernel_index in cached:
        return cached[kernel_index]
    values = _prefetch_of(kernel_inputs(program, kernel_index), count)
    if id(program) not in _EXAMPLES:
        _EXAMPLES[id(program)] = {}
        weakref.finalize(program, _EXAMPLES.pop, id(program), None)
    _EXAMPLES[id(program)][kernel_index] = values
    return values


def _prefetch_of(inputs: KernelInputs, count: int) -> tuple[np.ndarray, ...]:
    operands = inputs.operands
    if operands is None:
        return ()
    return tuple(np.asarray(v) for v in operands[:count])


def sized_kernel(
    program: Program | None, record: Kernel, leaves: Sequence[Any] | None = None
) -> Kernel:
    """The kernel with a grid sized at run time given the sizes its program computes.

    `grid=(n,)` with `n` a traced value is bound with the size as an operand (the
    record shows -1). Like scalar prefetch, it is evaluated from the program's inputs
    (the example arguments when `leaves` is None); a kernel with a static grid is
    returned as it is.

    Raises:
        ValueError: Naming the axes and why their sizes cannot be known here.
    """
    unknown = [axis for axis, size in enumerate(record.grid) if size < 0]
    if not unknown:
        return record
    inputs = kernel_inputs(program, record.index, leaves)
    values = inputs.values
    if values is None or inputs.offset != len(unknown):
        axes = ", ".join(str(a) for a in unknown)
        why = inputs.reason or "its sizes are not among the kernel's inputs"
        raise ValueError(
            f"{record.name}: grid axis {axes} is sized at run time (grid=(n, ...) with n "
            f"computed by the program), and its size could not be evaluated from the "
            f"example inputs: {why}."
        )
    sizes = iter(int(np.asarray(v)) for v in values[: inputs.offset])
    grid = tuple(next(sizes) if size < 0 else size for size in record.grid)
    return dataclasses.replace(record, grid=grid)
