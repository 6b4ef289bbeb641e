"""Benchmark sweeps: a kernel and its XLA baseline over sizes, into a DataFrame.

`bench(fn, make_args, sizes, ref=...)` times the kernel and the reference under
`jax.jit` (the XLA baseline) with the same harness at every size, tells an observer
as each measurement finishes (the live plot), and returns one row per impl x point.
Interrupting (Jupyter's stop button) ends the sweep cleanly with the rows so far.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.bench import harness, live, roofline
from pallaslab._src.bench.live import Observer
from pallaslab._src.bench.plan import SweepContext, sweep_context
from pallaslab._src.bench.rows import (
    MAIN_COLUMNS,
    PALLAS,
    XLA,
    Row,
    is_row_json,
    measured_row,
    to_frame,
)
from pallaslab._src.core import programs, tracing
from pallaslab._src.core.inspection import trace
from pallaslab._src.core.seeded import materialize

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAIN_COLUMNS",
    "PALLAS",
    "XLA",
    "Point",
    "Row",
    "SweepContext",
    "SweepOptions",
    "bench",
    "bench_points",
    "is_row_json",
    "measured_row",
    "mismatch_text",
    "resolve_live",
    "sweep_context",
    "to_frame",
]


@dataclasses.dataclass(frozen=True)
class Point:
    """One point of a sweep: its label, size, and the arguments for it.

    `make`, when given, makes the arguments when the point is measured (so a sweep
    over large sizes does not hold every size's inputs at once).
    """

    label: str
    size: Any
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    make: Callable[[], Any] | None = None

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The point's (args, kwargs)."""
        if self.make is None:
            return self.args, self.kwargs
        made = self.make()
        return (tuple(made) if isinstance(made, tuple | list) else (made,)), self.kwargs


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """How a sweep measures: `bench`'s keyword arguments of the same names.

    `title` is the plot's title as given (`bench` supplies "<fn> vs XLA" for none);
    `notices` say what the sweep will not do (`plan.no_baseline_notice`).
    """

    flops: float | Callable[[Any], float] | None = None
    bytes_accessed: float | Callable[[Any], float] | None = None
    chip: str | None = None
    check: bool = True
    live: bool | Observer | None = None
    settings: harness.TimerSettings | None = None
    seed: int = 0
    title: str = ""
    notices: tuple[str, ...] = ()


def bench(
    fn: Callable[..., Any],
    make_args: Callable[[Any], Any],
    sizes: Sequence[Any],
    ref: Callable[..., Any] | None = None,
    *,
    flops: float | Callable[[Any], float] | None = None,
    bytes_accessed: float | Callable[[Any], float] | None = None,
    chip: str | None = None,
    check: bool = True,
    live: bool | Observer | None = None,
    settings: harness.TimerSettings | None = None,
    seed: int = 0,
    title: str | None = None,
) -> pd.DataFrame:
    """Times a kernel and its XLA baseline over sizes; returns one row per impl x size.

    Args:
        fn: The Pallas implementation (any callable that runs kernels).
        make_args: `make_args(size)` returns the arguments for one size: a tuple (or
            one argument); `jax.ShapeDtypeStruct`s become seeded random data.
        sizes: The sizes to sweep, in order.
        ref: The reference; `jax.jit(ref)` is the XLA baseline, timed with the same
            harness, and the kernel's outputs are checked against it.
        flops: FLOPs per call (a number or `flops(size)`), overriding the kernels'
            declared or counted work.
        bytes_accessed: Bytes per call (a number or `bytes_accessed(size)`).
        chip: The chip whose roof to use ("H100", "v5e"); default: the device's.
        check: Check the kernel's outputs against the reference at every size.
        live: Progress and a live plot (None: as fits the environment; False: none;
            or an observer).
        settings: Timer settings (repetitions, budget, L2 flush ...).
        seed: Seed of the random inputs.
        title: The plot's title.

    Returns:
        A DataFrame with columns impl, size, median_ms, p25_ms, p75_ms, tflops, gbps,
        pct_of_peak, then compile_ms, reps, flops, bytes, correct, max_abs_err, mode,
        note, status, error. `df.attrs` holds the device, chip, peaks, where FLOPs and
        bytes came from, the CPU label and whether the sweep was interrupted.
    """
    points = [Point(str(size), size, make=functools.partial(make_args, size)) for size in sizes]
    title = title or f"{tracing.callable_name(fn)} vs XLA"
    options = SweepOptions(flops, bytes_accessed, chip, check, live, settings, seed, title)
    return bench_points(fn, points, ref, options)


def bench_points(
    fn: Callable[..., Any],
    points: Sequence[Point],
    ref: Callable[..., Any] | None,
    options: SweepOptions | None = None,
) -> pd.DataFrame:
    """`bench` over explicit points (the magic's `--bench` uses the cell's inputs)."""
    options = options or SweepOptions()
    observer = resolve_live(options.live)
    impls = [XLA, PALLAS] if ref is not None else [PALLAS]
    # The first point's inputs set the dtype whose peak is drawn.
    dtype = _dtype_of(points[0].arguments()[0]) if points else "float32"
    context = sweep_context(
        options.chip,
        options.title,
        kind="sweep",
        total=len(points) * len(impls),
        x_label="size",
        dtype=dtype,
        notices=options.notices,
    )
    shared = _Sweep(fn, ref, context, options)
    rows: list[Row] = []
    state, message = "finished", ""

    def emit(row: Row) -> None:
        rows.append(row)
        observer.update(row.to_json(), len(rows))

    observer.begin(context.plan)
    try:
        for point in points:
            _measure_point(shared, point, emit)
    except KeyboardInterrupt:
        state, message = "interrupted", f"kept the {len(rows)} measurement(s) made so far"
    except Exception as error:
        state, message = "failed", messages.one_line(error)
        observer.end(state, message)
        raise
    observer.end(state, message)
    return to_frame(rows, context, state=state)


@dataclasses.dataclass(frozen=True)
class _Sweep:
    """What every point of one sweep shares."""

    fn: Callable[..., Any]
    ref: Callable[..., Any] | None
    context: SweepContext
    options: SweepOptions


def _measure_point(sweep: _Sweep, point: Point, emit: Callable[[Row], None]) -> None:
    """Times the baseline, then the kernel (checked against it), at one point."""
    fn, ref, context, settings = sweep.fn, sweep.ref, sweep.context, sweep.options.settings
    flops, bytes_accessed = sweep.options.flops, sweep.options.bytes_accessed
    args, kwargs = materialize(point.arguments(), sweep.options.seed)
    x = (
        float(point.size)
        if isinstance(point.size, int | float) and not isinstance(point.size, bool)
        else None
    )
    base = {"size": point.size, "x": x}
    try:
        inspection = trace(fn, args, kwargs)
    except Exception as error:
        emit(
            Row(
                PALLAS,
                point.label,
                status="failed to trace",
                error=messages.one_line(error),
                **base,
            )
        )
        return
    work = roofline.program_work(
        inspection.kernels,
        inspection.args,
        inspection.outputs,
        flops=flops(point.size) if callable(flops) else flops,
        bytes_accessed=bytes_accessed(point.size) if callable(bytes_accessed) else bytes_accessed,
        xla_cost=(lambda: roofline.xla_cost_analysis(ref, [*args]))
        if ref is not None and not kwargs
        else None,
    )
    peaks = context.peaks(work.dtype)
    expected: Any = None
    if ref is not None:
        try:
            timing, expected = harness.measure_prepared(
                harness.prepare(ref, args, kwargs), settings
            )
            emit(measured_row(XLA, point.label, timing, work, peaks=peaks, **base))
        except KeyboardInterrupt:
            raise
        except Exception as error:
            emit(Row(XLA, point.label, status="failed", error=messages.one_line(error), **base))
    try:
        timing, outputs = harness.measure_prepared(harness.prepare(fn, args, kwargs), settings)
    except KeyboardInterrupt:
        raise
    except Exception as error:
        emit(Row(PALLAS, point.label, status="failed", error=messages.one_line(error), **base))
        return
    fields: dict[str, Any] = dict(base)
    if sweep.options.check and expected is not None:
        comparison = programs.compare_outputs(inspection, outputs, expected, args, kwargs)
        fields["correct"] = comparison.ok
        fields["max_abs_err"] = comparison.max_abs_err
        if not comparison.ok:
            fields["status"] = "wrong"
            fields["error"] = comparison.problem or mismatch_text(comparison)
    emit(measured_row(PALLAS, point.label, timing, work, peaks=peaks, **fields))


def mismatch_text(comparison: Any) -> str:
    """How many elements differ, and in which blocks."""
    where = "; ".join(f"output {t.output}: {t.pattern}" for t in comparison.tiles if t.bad_tiles)
    return f"{comparison.mismatched} element(s) differ from the reference" + (
        f" ({where})" if where else ""
    )


def resolve_live(value: bool | Observer | None) -> Observer:
    """The observer a `live=` argument asks for (see `live.resolve`)."""
    return live.resolve(value)


def _dtype_of(args: Sequence[Any]) -> str:
    """The dtype that sets the peak: the largest floating input's."""
    floating = [
        leaf
        for leaf in jax.tree_util.tree_leaves(args)
        if hasattr(leaf, "dtype") and jax.numpy.issubdtype(leaf.dtype, jax.numpy.floating)
    ]
    if not floating:
        return "float32"
    return str(max(floating, key=lambda a: int(np.prod(a.shape)) * a.dtype.itemsize).dtype)
