"""Requirements exercises put on a kernel besides its values.

Each factory returns a `Requirement` whose test reads the inspection of the student's
function: its kernels' records (grid, operands, races), its lowering for a target.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pallaslab._src.base import messages
from pallaslab._src.course.spec import Requirement

if TYPE_CHECKING:
    from pallaslab._src.core.inspection import Inspection


def one_kernel() -> Requirement:
    """Exactly one Pallas kernel, with nothing computed outside it."""

    def test(inspection: Inspection) -> str:
        count = len(inspection.kernels)
        if count != 1:
            return f"your function runs {count} Pallas kernels; this exercise wants one."
        outside = operations_outside_kernels(inspection)
        if outside:
            names = ", ".join(f"'{name}'" for name in outside)
            verb = "runs" if len(outside) == 1 else "run"
            return f"your function computes outside the kernel: {names} {verb} in XLA."
        return ""

    return Requirement(
        "one-kernel",
        test,
        "Do the whole computation inside the kernel body: the point of a fused kernel is "
        "that intermediate results never go back to memory.",
    )


# Operations that move or relabel data without computing: a wrapper may use them
# around its kernel (reshape an input, cast the result) and still be "one kernel".
# Call-like primitives (jit, custom_vjp ...) only wrap what they call.
_RELABELLING = frozenset(
    {
        "reshape",
        "squeeze",
        "expand_dims",
        "broadcast_in_dim",
        "convert_element_type",
        "copy",
        "copy_p",
    }
)


def operations_outside_kernels(inspection: Inspection) -> list[str]:
    """Primitives of the program that compute, outside any kernel body."""
    from pallaslab._src.core import programs  # noqa: PLC0415 - JAX only when graded

    return [n for n in programs.operations_outside_kernels(inspection) if n not in _RELABELLING]


def race_free(backend: str) -> Requirement:
    """No two programs that may run at the same time write one output block."""

    def test(inspection: Inspection) -> str:
        for kernel in inspection.kernels:
            try:
                report = inspection.race_report(kernel.index, backend)
            except ValueError as error:
                return f"its races could not be checked: {messages.error_text(error)}"
            if report.conflicts:
                return report.sentences(kernel)[0]
        return ""

    return Requirement(
        f"race-free-on-{backend}",
        test,
        (
            "On GPU every grid axis runs in parallel: give each output block one program "
            "and loop over the reduction inside the kernel (jax.lax.fori_loop)."
            if backend == "gpu"
            else "On TPU, only axes whose programs write separate blocks may be "
            '"parallel"; mark the reduction axis "arbitrary" and keep it last in the grid.'
        ),
    )


def lowers_for(target: str) -> Requirement:
    """The kernel lowers for `target` (e.g. "mosaic-tpu:v5e": the (8, 128) rule)."""

    def test(inspection: Inspection) -> str:
        for kernel in inspection.kernels:
            lowered = inspection.lower(target, kernel.index)
            if lowered.error:
                return f"it does not lower for {target}: {lowered.error.message}"
        return ""

    return Requirement(
        f"lowers-for-{target}",
        test,
        f"Look at inspection.lower({target!r}).error (or %%kernel ... --target {target}): "
        "it names the BlockSpec line to change.",
    )


def grid_axes(count: int) -> Requirement:
    """The kernel's grid has exactly `count` axes."""

    def test(inspection: Inspection) -> str:
        for kernel in inspection.kernels:
            if len(kernel.grid) != count:
                return (
                    f"kernel {kernel.name} has a grid of {len(kernel.grid)} "
                    f"ax{'is' if len(kernel.grid) == 1 else 'es'} {kernel.grid}; "
                    f"this exercise wants {count}."
                )
        return ""

    return Requirement(
        f"grid-{count}d",
        test,
        f"Give pallas_call a grid of {count} ax{'is' if count == 1 else 'es'}, one program "
        "per output block.",
    )


def block_shapes(expected: Sequence[tuple[int | None, ...] | None]) -> Requirement:
    """The kernel's operands have these block shapes (None: any)."""

    def test(inspection: Inspection) -> str:
        kernel = inspection.kernels[0] if inspection.kernels else None
        if kernel is None:
            return "no kernel"
        for operand, want in zip(kernel.operands, expected, strict=False):
            if want is not None and operand.block_shape != tuple(want):
                return (
                    f"{operand.label} has block shape {operand.block_shape}; this exercise "
                    f"wants {tuple(want)}."
                )
        return ""

    return Requirement("block-shapes", test, "Use the block shapes the task names.")


def body_uses(primitive: str, why: str) -> Requirement:
    """The kernel body contains `primitive` (e.g. "scan" for a `fori_loop`)."""

    def test(inspection: Inspection) -> str:
        for kernel in inspection.kernels:
            if re.search(rf"\b{re.escape(primitive)}\b", kernel.jaxpr):
                return ""
        return f"no '{primitive}' in the kernel's jaxpr: {why}"

    return Requirement(f"uses-{primitive}", test, why)


def body_avoids(primitive: str, why: str) -> Requirement:
    """The kernel body does not contain `primitive`."""

    def test(inspection: Inspection) -> str:
        for kernel in inspection.kernels:
            if re.search(rf"\b{re.escape(primitive)}\b", kernel.jaxpr):
                return f"the kernel's jaxpr contains '{primitive}': {why}"
        return ""

    return Requirement(f"avoids-{primitive}", test, why)


def memory_space(operand: int, space: str) -> Requirement:
    """Operand `operand` of the (first) kernel lives in memory space `space`."""

    def test(inspection: Inspection) -> str:
        if not inspection.kernels:
            return "no kernel"
        operands = inspection.kernels[0].operands
        if operand >= len(operands):
            return f"the kernel has only {len(operands)} operands."
        found = operands[operand]
        if found.memory_space != space:
            return f"{found.label} lives in {found.memory_space} memory, not {space}."
        return ""

    return Requirement(
        f"operand-{operand}-in-{space}",
        test,
        f"Give that operand pl.BlockSpec(memory_space=pltpu.{space.upper()}).",
    )


def tensor_cores(kinds: Sequence[str] = ("wgmma", "tcgen05")) -> Requirement:
    """A Mosaic GPU kernel multiplies on the tensor cores (`plgpu.wgmma`, `tcgen05_mma`)."""

    def test(inspection: Inspection) -> str:
        for kernel in inspection.kernels:
            try:
                plan = inspection.plan(kernel.index)
            except ValueError as error:
                return f"its products could not be read: {messages.error_text(error)}"
            if any(mma.kind in kinds for mma in plan.mmas):
                return ""
        return "no product in the kernel runs on the tensor cores."

    return Requirement(
        "tensor-cores",
        test,
        "Multiply the shared-memory tiles with plgpu.wgmma(acc, a_smem, b_smem) into a "
        "plgpu.ACC accumulator: a warpgroup matrix multiply on the tensor cores.",
    )
