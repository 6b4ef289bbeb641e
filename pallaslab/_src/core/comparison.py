"""The one comparison of a program's outputs with a reference.

Every caller compares the same way: a run with `ref=`, `%%kernel --ref`, checks over
sizes and dtypes, sweeps, tuning and exercise grading. Outputs and references must
agree in number, shape and dtype (else `Comparison.problem` says how they differ);
then each output is compared element by element within a tolerance fit for its dtype
(`geometry/mismatch.py`) and, given the traced program, its mismatches are located
per block of the kernel that writes it, once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.core import jax_adapter, mosaic_gpu
from pallaslab._src.core.prefetch import prefetch_values
from pallaslab._src.core.program import Traced, program_of
from pallaslab._src.geometry import mismatch
from pallaslab._src.geometry.mismatch import ElementErrors
from pallaslab._src.records import Comparison, Operand, TileMismatch
from pallaslab._src.records.mosaic_gpu import CopyWindows

# Locates one output's mismatches: (output index, element errors) -> per-block record.
Locator = Callable[[int, ElementErrors], TileMismatch]


def compare(
    outputs: Sequence[np.ndarray],
    expected: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    locate: Locator | None = None,
) -> Comparison:
    """Compares outputs with a reference, with tolerances fit for each output's dtype.

    Args:
        outputs: The program's outputs, flattened.
        expected: The reference's outputs (any pytree of arrays).
        rtol: Relative tolerance (default: fit for each output's dtype).
        atol: Absolute tolerance, relative to the reference's largest magnitude
            (default: fit for each output's dtype).
        locate: Locates each output's mismatches per block (`locator`); without it,
            `Comparison.tiles` stays empty.
    """
    references = [np.asarray(r) for r in jax.tree_util.tree_leaves(expected)]
    if len(references) != len(outputs):
        return _mismatch(
            f"the reference gives {len(references)} array(s) but the program returns {len(outputs)}"
        )
    for k, (out, want) in enumerate(zip(outputs, references, strict=True)):
        where = f" (output {k})" if len(outputs) > 1 else ""
        if out.shape != want.shape:
            return _mismatch(
                f"the reference has shape {tuple(want.shape)} but the program returns "
                f"{tuple(out.shape)}{where}"
            )
        if out.dtype != want.dtype:
            return _mismatch(
                f"the reference has dtype {want.dtype} but the program returns {out.dtype}{where}"
            )
    max_abs = max_rel = 0.0
    mismatched = 0
    rtol_used = atol_used = 0.0
    located = []
    for k, (out, want) in enumerate(zip(outputs, references, strict=True)):
        default_rtol, default_atol = mismatch.tolerance_for(str(out.dtype))
        errors = mismatch.element_errors(
            out,
            want,
            default_rtol if rtol is None else rtol,
            default_atol if atol is None else atol,
        )
        mismatched += int(errors.bad.sum())
        max_abs, max_rel = max(max_abs, errors.max_abs_err), max(max_rel, errors.max_rel_err)
        rtol_used, atol_used = max(rtol_used, errors.rtol), max(atol_used, errors.atol)
        if locate is not None:
            located.append(locate(k, errors))
    return Comparison(
        ok=mismatched == 0,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        rtol=rtol_used,
        atol=atol_used,
        mismatched=mismatched,
        tiles=tuple(located),
    )


def compare_located(
    traced: Traced,
    outputs: Sequence[np.ndarray],
    expected: Any,
    *,
    leaves: Sequence[Any] | None = None,
    rtol: float | None = None,
    atol: float | None = None,
) -> Comparison:
    """`compare`, with each output's mismatches located on the kernel that writes it.

    Args:
        traced: The records (and program) of the program that gave `outputs`.
        outputs: Its outputs, flattened.
        expected: The reference's outputs.
        leaves: The program's traced inputs (for index maps that read scalar-prefetch
            values); None: the example arguments.
        rtol: Relative tolerance (default: fit for each output's dtype).
        atol: Absolute tolerance (default: fit for each output's dtype).
    """
    return compare(
        outputs, expected, rtol=rtol, atol=atol, locate=locator(traced, len(outputs), leaves)
    )


def locator(traced: Traced, count: int, leaves: Sequence[Any] | None = None) -> Locator:
    """Locates mismatches of `traced`'s outputs on the blocks of the kernels writing them."""
    writers = _writers(traced, count)
    paths = [spec.path for spec in traced.outputs]

    def locate(k: int, errors: ElementErrors) -> TileMismatch:
        path = paths[k] if k < len(paths) else f"[{k}]"
        try:
            return _locate(traced, errors, path, writers[k], leaves)
        except Exception as error:  # locating is extra: the comparison itself stands
            return mismatch.locate(
                errors,
                output=path,
                operand=None,
                note=f"Its blocks could not be located ({messages.one_line(error)}).",
            )

    return locate


def _writers(traced: Traced, count: int) -> list[tuple[int, int] | None]:
    """Per output, the (kernel, output operand) that writes it as is, where one does."""
    program = program_of(traced)
    if program is None or program.closed_jaxpr is None:
        return [None] * count
    try:
        found = jax_adapter.output_writers(program.closed_jaxpr, program.sites)
    except Exception:  # then each output falls back to a kernel output of its shape
        return [None] * count
    return found if len(found) == count else [None] * count


def _locate(
    traced: Traced,
    errors: ElementErrors,
    path: str,
    writer: tuple[int, int] | None,
    leaves: Sequence[Any] | None,
) -> TileMismatch:
    placed = _placement(traced, tuple(errors.bad.shape), path, writer, leaves)
    return _located(errors, placed)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where one output's mismatches are located: `mismatch.locate`'s arguments.

    Plain records and arrays, so a comparison made in another process (a tuning
    worker, which holds no traced program) locates its mismatches as this one would.
    """

    output: str
    operand: Operand | None
    grid: tuple[int, ...] = ()
    kernel: str = ""
    prefetch: tuple[np.ndarray, ...] = ()
    note: str = ""
    windows: CopyWindows | None = None
    window_grid: tuple[int, ...] = ()


def placements(traced: Traced, leaves: Sequence[Any] | None = None) -> tuple[Placement, ...]:
    """Each output's placement on the kernel blocks that write it (see `Placement`)."""
    count = len(traced.outputs)
    writers = _writers(traced, count)
    found = []
    for k, spec in enumerate(traced.outputs):
        try:
            found.append(_placement(traced, tuple(spec.shape), spec.path, writers[k], leaves))
        except Exception as error:  # locating is extra: the comparison itself stands
            note = f"Its blocks could not be located ({messages.one_line(error)})."
            found.append(Placement(spec.path, None, note=note))
    return tuple(found)


def placed_locator(placed: Sequence[Placement]) -> Locator:
    """A locator from placements made where the program was traced."""

    def locate(k: int, errors: ElementErrors) -> TileMismatch:
        if k >= len(placed) or tuple(errors.bad.shape) != _shape_of(placed[k], errors):
            return mismatch.locate(errors, output=f"[{k}]", operand=None)
        return _located(errors, placed[k])

    return locate


def _located(errors: ElementErrors, placed: Placement) -> TileMismatch:
    """`mismatch.locate` (or `locate_windows`, for a kernel's store windows) as placed."""
    if placed.windows is not None and placed.operand is not None:
        on_windows = mismatch.locate_windows(
            errors,
            output=placed.output,
            operand=placed.operand,
            windows=placed.windows,
            grid=placed.window_grid,
            kernel=placed.kernel,
            note=placed.note,
        )
        if on_windows is not None:
            return on_windows
    # Shallow: the operand stays a record (`dataclasses.asdict` would make it a dict).
    arguments = {f.name: getattr(placed, f.name) for f in dataclasses.fields(placed)}
    del arguments["windows"], arguments["window_grid"]
    return mismatch.locate(errors, **arguments)  # no windows, or they do not tile it


def _shape_of(placed: Placement, errors: ElementErrors) -> tuple[int, ...]:
    # An operand's block placement holds for outputs of the operand's shape only.
    if placed.operand is None:
        return tuple(errors.bad.shape)
    return tuple(placed.operand.shape)


def _placement(
    traced: Traced,
    shape: tuple[int, ...],
    path: str,
    writer: tuple[int, int] | None,
    leaves: Sequence[Any] | None,
) -> Placement:
    note = ""
    found: tuple[int, Operand] | None = None
    if writer is not None:
        kernel_index, out_index = writer
        outs = traced.kernels[kernel_index].outputs
        if out_index < len(outs) and outs[out_index].shape == shape:
            found = kernel_index, outs[out_index]
    if found is None:
        # Computed after a kernel (a cast, a reshape ...): use the last kernel output
        # of the same shape, and say so.
        for kernel in reversed(traced.kernels):
            same = [o for o in kernel.outputs if o.shape == shape]
            if same:
                found = kernel.index, same[0]
                note = (
                    f"Output {path} is not returned by a kernel as is; its tiles are the "
                    f"blocks of {kernel.name}'s {same[0].label}, which has the same shape."
                )
                break
    if found is None:
        note = f"No kernel writes output {path}; it is shown as one tile."
        return Placement(path, None, note=note)
    kernel_index, operand = found
    kernel = traced.kernels[kernel_index]
    if mosaic_gpu.copies_are_the_map(kernel):
        placed = _window_placement(traced, path, kernel_index, operand, note)
        if placed is not None:
            return placed
    prefetch = (
        prefetch_values(program_of(traced), kernel_index, list(leaves) if leaves else None)
        if kernel.num_scalar_prefetch
        else ()
    )
    return Placement(path, operand, tuple(kernel.grid), kernel.name, tuple(prefetch), note)


def _window_placement(
    traced: Traced, path: str, kernel_index: int, operand: Operand, note: str
) -> Placement | None:
    """A mesh kernel's placement on the windows its writes land on (None: none known)."""
    kernel = traced.kernels[kernel_index]
    try:
        plan = mosaic_gpu.kernel_plan(traced, kernel_index)
    except ValueError:
        return None
    same = (operand.label, operand.role)
    index = next((k for k, o in enumerate(kernel.operands) if (o.label, o.role) == same), None)
    found = [w for w in plan.windows if w.operand == index and w.direction == "write"]
    if len(found) != 1 or found[0].unknown:
        return None
    return Placement(
        path,
        operand,
        tuple(kernel.grid),
        kernel.name,
        note=note,
        windows=found[0],
        window_grid=tuple(plan.grid),
    )


def _mismatch(problem: str) -> Comparison:
    nan = float("nan")
    return Comparison(
        ok=False, max_abs_err=nan, max_rel_err=nan, rtol=0.0, atol=0.0, problem=problem
    )
