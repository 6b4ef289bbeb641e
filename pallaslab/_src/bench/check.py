"""Checking kernels against a reference: seeded inputs, dtype-fit tolerances, bad tiles.

`check` runs a program and its reference on the same inputs (seeded random data for
shapes; optionally several sizes and dtypes), compares every output with a tolerance
fit for its dtype, and locates mismatches block by block on the kernel's output tiling,
so a wrong last row of blocks is one look, not a search.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import numpy as np

from pallaslab._src import closeness, messages
from pallaslab._src.bench import live, tiles
from pallaslab._src.core import jax_adapter, running, tracing
from pallaslab._src.core.inspection import Inspection, Program
from pallaslab._src.core.prefetch import prefetch_values
from pallaslab._src.core.running import tolerance_for
from pallaslab._src.records import ArraySpec, Comparison, Operand, RunResult, TileMismatch


@dataclasses.dataclass(frozen=True)
class CheckPoint:
    """One checked set of inputs.

    Attributes:
        label: What was checked, e.g. "size=256 · bfloat16" or "the given inputs".
        size: The size passed to `make_args` (None when inputs were given).
        dtype: The dtype floating inputs were cast to (None when not cast).
        args: Shapes and dtypes of the inputs.
        comparison: How the outputs compare, with mismatches per output block.
        result: The kernel's run (outputs, backend, mode).
        error: Why the point could not be checked ("" when it was).
        program: The name of the program traced for this point.
    """

    label: str
    size: Any
    dtype: str | None
    args: tuple[ArraySpec, ...]
    comparison: Comparison | None
    result: RunResult | None = None
    error: str = ""
    program: str = ""

    @property
    def ok(self) -> bool:
        """Whether the kernel ran and matched the reference."""
        return not self.error and self.comparison is not None and self.comparison.ok


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """A kernel checked against a reference, on one or more sets of inputs.

    Attributes:
        name: The checked program's name.
        points: One entry per set of inputs (size x dtype).
        seed: The seed random inputs were drawn with.
    """

    name: str
    points: tuple[CheckPoint, ...]
    seed: int = 0

    @property
    def ok(self) -> bool:
        """Whether every point matched."""
        return bool(self.points) and all(p.ok for p in self.points)

    @property
    def failing(self) -> tuple[CheckPoint, ...]:
        """The points that did not match (or could not run)."""
        return tuple(p for p in self.points if not p.ok)

    @property
    def max_abs_err(self) -> float:
        """Largest absolute error over all points (NaN when none could be compared)."""
        return _largest(p.comparison.max_abs_err for p in self._compared)

    @property
    def max_rel_err(self) -> float:
        """Largest relative error over all points."""
        return _largest(p.comparison.max_rel_err for p in self._compared)

    @property
    def mismatched(self) -> int:
        """Elements outside tolerance, over all points."""
        return sum(p.comparison.mismatched for p in self._compared)

    @property
    def tiles(self) -> tuple[TileMismatch, ...]:
        """Per output, mismatches per block, for the first failing point (else the first)."""
        point = next((p for p in self.failing if p.comparison), None) or next(
            (p for p in self.points if p.comparison), None
        )
        return point.comparison.tiles if point and point.comparison else ()

    @property
    def heatmap(self) -> TileMismatch | None:
        """The output whose blocks to look at: the first that differs (else the first)."""
        found = self.tiles
        return next((t for t in found if t.bad_tiles), found[0] if found else None)

    @property
    def bad_tiles(self) -> tuple[tuple[int, ...], ...]:
        """Output blocks that differ (first failing point, first differing output).

        A block is named by its index in the output's tiling by the block shape,
        which is the grid index of the program writing it when the output's index
        map is the identity (`lambda i, j: (i, j)`); see `bad_programs` otherwise.
        """
        tile = self.heatmap
        return tile.bad_tiles if tile is not None else ()

    @property
    def bad_programs(self) -> tuple[tuple[int, ...], ...]:
        """Grid indices of the programs whose output block differs."""
        tile = self.heatmap
        return tile.bad_programs if tile is not None else ()

    @property
    def nan_count(self) -> int:
        """NaN elements in outputs where the reference has none, over all points."""
        return sum(t.nan_count for p in self._compared for t in p.comparison.tiles)

    @property
    def inf_count(self) -> int:
        """Infinite elements in outputs where the reference is finite."""
        return sum(t.inf_count for p in self._compared for t in p.comparison.tiles)

    @property
    def _compared(self) -> list[Any]:
        return [p for p in self.points if p.comparison is not None and not p.comparison.problem]

    def summary(self) -> str:
        """One line per point: pass/fail, errors and where the mismatches are."""
        lines = [f"check of {self.name}: {'PASS' if self.ok else 'FAIL'}"]
        lines += [f"  {describe_point(p)}" for p in self.points]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return live.render(self, **kwargs)


def describe_point(point: CheckPoint) -> str:
    """One line for one checked point."""
    if point.error:
        return f"{point.label}: could not run: {point.error}"
    comparison = point.comparison
    assert comparison is not None
    if comparison.problem:
        return f"{point.label}: {comparison.problem}"
    errors = (
        f"max abs err {comparison.max_abs_err:.3g}, max rel err {comparison.max_rel_err:.3g} "
        f"(rtol {comparison.rtol:.2g}, atol {comparison.atol:.2g})"
    )
    if comparison.ok:
        return f"{point.label}: ok, {errors}"
    parts = [f"{point.label}: {comparison.mismatched} element(s) differ, {errors}"]
    for tile in comparison.tiles:
        if not tile.bad_tiles and not tile.nan_count and not tile.inf_count:
            continue
        where = f"output {tile.output}"
        if tile.bad_tiles:
            where += f": {len(tile.bad_tiles)} of {tile.counts.size} blocks differ ({tile.pattern})"
        if tile.nan_count or tile.inf_count:
            where += f"; {tile.nan_count} NaN, {tile.inf_count} Inf where the reference is finite"
        parts.append(where)
    return "; ".join(parts)


def _largest(values: Iterable[float]) -> float:
    found = list(values)
    return max(found) if found else float("nan")


# ---------------------------------------------------------------------------
# Comparing outputs, with the mismatches located on the kernels' output blocks.


def compare_located(
    outputs: Sequence[np.ndarray],
    expected: Any,
    inspection: Inspection,
    *,
    leaves: Sequence[Any] = (),
    rtol: float | None = None,
    atol: float | None = None,
) -> Comparison:
    """Compares outputs with a reference and locates mismatches per output block.

    Args:
        outputs: The program's outputs, flattened.
        expected: The reference's outputs (any pytree of arrays).
        inspection: The inspection of the program that produced `outputs`.
        leaves: The program's traced inputs (for scalar-prefetch index maps).
        rtol: Relative tolerance (default: fit for each output's dtype).
        atol: Absolute tolerance, relative to the reference's largest magnitude
            (default: fit for each output's dtype).
    """
    references = [np.asarray(r) for r in jax.tree_util.tree_leaves(expected)]
    base = running.compare(list(outputs), references)
    if base.problem:
        return base
    writers = _writers(inspection, len(outputs))
    paths = [spec.path for spec in inspection.outputs] or [f"[{k}]" for k in range(len(outputs))]
    max_abs = max_rel = 0.0
    mismatched = 0
    rtol_used = atol_used = 0.0
    located = []
    for k, (out, want) in enumerate(zip(outputs, references, strict=True)):
        default_rtol, default_atol = tolerance_for(str(out.dtype))
        errors = closeness.element_errors(
            out,
            want,
            default_rtol if rtol is None else rtol,
            default_atol if atol is None else atol,
        )
        mismatched += int(errors.bad.sum())
        max_abs, max_rel = max(max_abs, errors.max_abs_err), max(max_rel, errors.max_rel_err)
        rtol_used, atol_used = max(rtol_used, errors.rtol), max(atol_used, errors.atol)
        located.append(
            _locate(
                errors, paths[k] if k < len(paths) else f"[{k}]", writers[k], inspection, leaves
            )
        )
    return Comparison(
        ok=mismatched == 0,
        max_abs_err=max_abs,
        max_rel_err=max_rel,
        rtol=rtol_used,
        atol=atol_used,
        mismatched=mismatched,
        tiles=tuple(located),
    )


def _program_of(inspection: Inspection) -> Program | None:
    try:
        return inspection.program
    except ValueError:
        return None


def _writers(inspection: Inspection, count: int) -> list[tuple[int, int] | None]:
    program = _program_of(inspection)
    if program is None or program.closed_jaxpr is None:
        return [None] * count
    try:
        found = jax_adapter.output_writers(program.closed_jaxpr, program.sites)
    except Exception:
        return [None] * count
    return found if len(found) == count else [None] * count


def _locate(
    errors: closeness.ElementErrors,
    path: str,
    writer: tuple[int, int] | None,
    inspection: Inspection,
    leaves: Sequence[Any],
) -> TileMismatch:
    shape = tuple(errors.bad.shape)
    note = ""
    found: tuple[int, Operand] | None = None
    if writer is not None:
        kernel_index, out_index = writer
        outs = inspection.kernels[kernel_index].outputs
        if out_index < len(outs) and outs[out_index].shape == shape:
            found = kernel_index, outs[out_index]
    if found is None:
        # Computed after a kernel (a cast, a reshape ...): use the last kernel output
        # of the same shape, and say so.
        for kernel in reversed(inspection.kernels):
            same = [o for o in kernel.outputs if o.shape == shape]
            if same:
                found = kernel.index, same[0]
                note = (
                    f"Output {path} is not returned by a kernel as is; its tiles are the "
                    f"blocks of {kernel.name}'s {same[0].label}, which has the same shape."
                )
                break
    if found is None:
        return tiles.locate(
            errors,
            output=path,
            operand=None,
            note=f"No kernel writes output {path}; it is shown as one tile.",
        )
    kernel_index, operand = found
    kernel = inspection.kernels[kernel_index]
    return tiles.locate(
        errors,
        output=path,
        operand=operand,
        grid=kernel.grid,
        kernel=kernel.name,
        prefetch=_prefetch(inspection, kernel_index, leaves),
        note=note,
    )


def _prefetch(inspection: Inspection, kernel_index: int, leaves: Sequence[Any]) -> tuple[Any, ...]:
    return prefetch_values(_program_of(inspection), kernel_index, list(leaves) or None)


def with_located_mismatches(inspection: Inspection) -> Inspection:
    """The inspection with its run's comparison located per output block.

    Used after `%%kernel ... --ref`: the run kept the reference's outputs; this
    recomputes the comparison with pallaslab's tolerances and adds the tiles.
    """
    result = inspection.result
    if result is None or result.comparison is None or result.comparison.problem:
        return inspection
    if not result.expected or len(result.expected) != len(result.values):
        return inspection
    program = _program_of(inspection)
    leaves = tuple(program.example_args) if program is not None else ()
    comparison = compare_located(result.values, list(result.expected), inspection, leaves=leaves)
    return inspection.with_result(dataclasses.replace(result, comparison=comparison))


# ---------------------------------------------------------------------------
# Checking over seeded inputs, sizes and dtypes.


def check(
    fn: Callable[..., Any],
    ref: Any,
    *args: Any,
    make_args: Callable[[Any], Any] | None = None,
    sizes: Sequence[Any] | None = None,
    dtypes: Sequence[Any] | None = None,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    kwargs: dict[str, Any] | None = None,
) -> CheckResult:
    """Runs `fn` and the reference on the same inputs and compares them.

    Args:
        fn: The program to check (a `pallas_call`, a jitted function ...).
        ref: The reference: a callable taking the same arguments, or the expected
            output(s) (only with a single set of inputs).
        *args: The inputs; `jax.ShapeDtypeStruct`s become seeded random data.
        make_args: `make_args(size)` returns the arguments for one size (a tuple,
            or a single argument); used with `sizes`.
        sizes: Sizes to check, passed to `make_args` one at a time.
        dtypes: Also check with floating inputs cast to each of these dtypes.
        seed: Seed of the random inputs.
        rtol: Relative tolerance (default: fit for each output's dtype).
        atol: Absolute tolerance, relative to the reference's largest magnitude.
        kwargs: Keyword arguments for `fn` and the reference.

    Returns:
        The result: `.ok`, `.max_abs_err`, `.max_rel_err`, `.bad_tiles` (output
        blocks that differ), `.heatmap` and one `CheckPoint` per set of inputs.
    """
    points = _input_points(args, dict(kwargs or {}), make_args, sizes, dtypes)
    if not callable(ref) and len(points) > 1:
        raise ValueError(
            "a reference given as a value fits one set of inputs; pass a callable to "
            "check several sizes or dtypes"
        )
    checked = [
        _check_point(
            point,
            lambda a, k: tracing.trace_program(fn, a, k),
            ref=ref,
            seed=seed,
            rtol=rtol,
            atol=atol,
        )
        for point in points
    ]
    named = next((p.program for p in checked if p.program), name_of(fn))
    return CheckResult(name=named, points=tuple(checked), seed=seed)


def check_inspection(
    inspection: Inspection,
    ref: Any,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    make_args: Callable[[Any], Any] | None = None,
    sizes: Sequence[Any] | None = None,
    dtypes: Sequence[Any] | None = None,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
) -> CheckResult:
    """`Inspection.check`: the inspected program against a reference.

    Without arguments, the inspected example arguments are used (seeded random data
    where they were shapes). New arguments must be laid out as the inspected ones.
    """
    program = inspection.program
    if program.flat_fn is None or program.rebuild is None or program.split is None:
        raise ValueError("no single program was traced; name a call to check it")
    base_args, base_kwargs = (
        (tuple(args), dict(kwargs or {}))
        if args or kwargs or make_args is not None
        else program.rebuild(list(program.example_args))
    )
    points = _input_points(base_args, base_kwargs, make_args, sizes, dtypes)
    if not callable(ref) and len(points) > 1:
        raise ValueError(
            "a reference given as a value fits one set of inputs; pass a callable to "
            "check several sizes or dtypes"
        )
    flat_fn = program.flat_fn
    split = program.split

    def trace(point_args: tuple[Any, ...], point_kwargs: dict[str, Any]) -> Program:
        # Static arguments (block sizes, callables) stay those of the inspected call.
        leaves = split(point_args, point_kwargs)
        traced = tracing.trace_program(flat_fn, leaves, {})
        return dataclasses.replace(traced, name=program.name, split=split, rebuild=program.rebuild)

    checked = [
        _check_point(point, trace, ref=ref, seed=seed, rtol=rtol, atol=atol) for point in points
    ]
    return CheckResult(name=inspection.name, points=tuple(checked), seed=seed)


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """One set of inputs to check: its label, size, dtype and arguments."""

    label: str
    size: Any
    dtype: str | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _input_points(
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    make_args: Callable[[Any], Any] | None,
    sizes: Sequence[Any] | None,
    dtypes: Sequence[Any] | None,
) -> list[_Inputs]:
    if (make_args is None) != (sizes is None):
        raise ValueError("pass make_args and sizes together: make_args(size) gives the inputs")
    base: list[_Inputs]
    if make_args is not None and sizes is not None:
        base = []
        for size in sizes:
            made = make_args(size)
            call_args = tuple(made) if isinstance(made, tuple | list) else (made,)
            base.append(_Inputs(f"size={size}", size, None, call_args, dict(kwargs)))
    else:
        label = "the given inputs" if args or kwargs else "no inputs"
        base = [_Inputs(label, None, None, args, kwargs)]
    if not dtypes:
        return base
    points = []
    for point in base:
        for dtype in dtypes:
            name = np.dtype(dtype).name
            cast_args, cast_kwargs = _cast_floating((point.args, point.kwargs), dtype)
            where = name if point.size is None else f"{point.label} · {name}"
            points.append(_Inputs(where, point.size, name, tuple(cast_args), dict(cast_kwargs)))
    return points


def _cast_floating(tree: Any, dtype: Any) -> Any:
    def cast(leaf: Any) -> Any:
        leaf_dtype = getattr(leaf, "dtype", None)
        if leaf_dtype is None or not jax.numpy.issubdtype(leaf_dtype, jax.numpy.floating):
            return leaf
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return jax.ShapeDtypeStruct(leaf.shape, dtype)
        return jax.numpy.asarray(leaf, dtype=dtype)

    return jax.tree_util.tree_map(cast, tree)


def materialize(tree: Any, seed: int) -> Any:
    """`ShapeDtypeStruct` leaves become seeded random arrays; other leaves stay."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return jax.tree_util.tree_unflatten(treedef, running.example_arrays(leaves, seed=seed))


def _check_point(
    point: _Inputs,
    trace: Callable[[tuple[Any, ...], dict[str, Any]], Program],
    *,
    ref: Any,
    seed: int,
    rtol: float | None,
    atol: float | None,
) -> CheckPoint:
    call_args, call_kwargs = materialize((point.args, point.kwargs), seed)
    label, size, dtype = point.label, point.size, point.dtype
    specs: tuple[ArraySpec, ...] = ()
    try:
        program = trace(call_args, call_kwargs)
        specs = program.args
        inspection = Inspection.from_program(program)
        result = running.run_program(program, call_args, call_kwargs)
    except Exception as error:
        return CheckPoint(label, size, dtype, specs, None, error=one_line(error))
    try:
        expected = ref(*call_args, **call_kwargs) if callable(ref) else ref
    except Exception as error:
        return CheckPoint(
            label,
            size,
            dtype,
            specs,
            None,
            result,
            error="the reference failed: " + one_line(error),
        )
    leaves = program.dynamic_leaves(call_args, call_kwargs) if program.split else ()
    comparison = compare_located(
        result.values, expected, inspection, leaves=leaves, rtol=rtol, atol=atol
    )
    return CheckPoint(label, size, dtype, specs, comparison, result, program=inspection.name)


def one_line(error: BaseException) -> str:
    """`TypeName: first line of the message`, clipped, never raising."""
    return messages.one_line(error)


def name_of(fn: Callable[..., Any]) -> str:
    inner = getattr(fn, "func", fn)
    return str(getattr(inner, "__name__", type(inner).__name__))
