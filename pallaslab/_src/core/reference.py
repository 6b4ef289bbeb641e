"""Checking a program against a reference: seeded inputs, sizes, dtypes, bad tiles.

`check` runs a program and its reference on the same inputs (seeded random data for
shapes; optionally several sizes and dtypes), compares every output with a tolerance
fit for its dtype, and locates mismatches block by block on the kernel's output tiling
(`comparison.compare_located`), so a wrong last row of blocks is one look, not a
search. `Inspection.check` does the same for an inspected call, its static arguments
kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypedDict, Unpack

import jax
import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.core import running, tracing
from pallaslab._src.core.comparison import compare_located
from pallaslab._src.core.program import Program, Traced, require_call
from pallaslab._src.core.seeded import materialize
from pallaslab._src.records import ArraySpec
from pallaslab._src.records.checks import CheckPoint, CheckResult


class CheckOptions(TypedDict, total=False):
    """How `check` makes, varies and compares inputs (its keyword arguments)."""

    make_args: Callable[[Any], Any] | None
    sizes: Sequence[Any] | None
    dtypes: Sequence[Any] | None
    seed: int
    rtol: float | None
    atol: float | None


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
    options = CheckOptions(
        make_args=make_args, sizes=sizes, dtypes=dtypes, seed=seed, rtol=rtol, atol=atol
    )
    points = _input_points(ref, args, dict(kwargs or {}), options)
    checked = _check_points(points, lambda a, k: tracing.trace_program(fn, a, k), ref, options)
    named = next((p.program for p in checked if p.program), tracing.callable_name(fn))
    return CheckResult(name=named, points=tuple(checked), seed=seed)


def check_traced(
    traced: Traced,
    ref: Any,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    **options: Unpack[CheckOptions],
) -> CheckResult:
    """`Inspection.check`: the inspected program against a reference.

    Without arguments, the inspected example arguments are used (seeded random data
    where they were shapes). New arguments must be laid out as the inspected ones.
    """
    program = require_call(traced, "check it")
    assert program.flat_fn is not None
    assert program.rebuild is not None
    assert program.split is not None
    base_args, base_kwargs = (
        (tuple(args), dict(kwargs or {}))
        if args or kwargs or options.get("make_args") is not None
        else program.rebuild(program.examples())
    )
    points = _input_points(ref, base_args, base_kwargs, options)
    flat_fn, split, rebuild = program.flat_fn, program.split, program.rebuild

    def trace(point_args: tuple[Any, ...], point_kwargs: dict[str, Any]) -> Program:
        # Static arguments (block sizes, callables) stay those of the inspected call.
        leaves = split(point_args, point_kwargs)
        traced = tracing.trace_program(flat_fn, leaves, {})
        return dataclasses.replace(traced, name=program.name, split=split, rebuild=rebuild)

    checked = _check_points(points, trace, ref, options)
    return CheckResult(name=traced.name, points=tuple(checked), seed=options.get("seed", 0))


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """One set of inputs to check: its label, size, dtype and arguments."""

    label: str
    size: Any
    dtype: str | None
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _input_points(
    ref: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: CheckOptions,
) -> list[_Inputs]:
    make_args, sizes, dtypes = options.get("make_args"), options.get("sizes"), options.get("dtypes")
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
    if not callable(ref) and len(base) * max(len(dtypes or ()), 1) > 1:
        raise ValueError(
            "a reference given as a value fits one set of inputs; pass a callable to "
            "check several sizes or dtypes"
        )
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


def _check_points(
    points: Sequence[_Inputs],
    trace: Callable[[tuple[Any, ...], dict[str, Any]], Program],
    ref: Any,
    options: CheckOptions,
) -> list[CheckPoint]:
    """Each set of inputs checked: the program traced and run, and the reference."""
    seed, rtol, atol = options.get("seed", 0), options.get("rtol"), options.get("atol")
    return [_check_point(p, trace, ref=ref, seed=seed, rtol=rtol, atol=atol) for p in points]


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
        traced = Traced.from_program(program)
        result = running.run(traced, call_args, call_kwargs)
    except Exception as error:
        return CheckPoint(label, size, dtype, specs, None, error=messages.one_line(error))
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
            error="the reference failed: " + messages.one_line(error),
        )
    comparison = compare_located(
        traced,
        result.values,
        expected,
        leaves=program.leaves_of(call_args, call_kwargs),
        rtol=rtol,
        atol=atol,
    )
    return CheckPoint(label, size, dtype, specs, comparison, result, program=traced.name)
