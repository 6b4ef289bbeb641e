"""Benchmark sweeps: a kernel and its XLA baseline over sizes, into a DataFrame.

`bench(fn, make_args, sizes, ref=...)` times the kernel and the reference under
`jax.jit` (the XLA baseline) with the same harness at every size, tells an observer
as each measurement finishes (the live plot), and returns one row per impl x point.
Interrupting (Jupyter's stop button) ends the sweep cleanly with the rows so far.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.bench import harness, live, roofline
from pallaslab._src.bench.live import Observer
from pallaslab._src.core import programs, tracing
from pallaslab._src.core.inspection import trace
from pallaslab._src.core.seeded import materialize

if TYPE_CHECKING:
    import pandas as pd

PALLAS, XLA = "pallas", "xla"
# The columns the issue promises, first; then the rest.
MAIN_COLUMNS = ("impl", "size", "median_ms", "p25_ms", "p75_ms", "tflops", "gbps", "pct_of_peak")


@dataclasses.dataclass(frozen=True)
class Row:
    """One measurement: one implementation at one point (a size or a config).

    Attributes:
        impl: "pallas", "xla", or a name the caller chose.
        point: The point as text ("1024", "BLOCK_M=64, BLOCK_N=128").
        size: The size as given to `make_args` (None for configs).
        x: The point as a number, for plotting (None when it is not one).
        config: The config's values (tuning), else empty.
        status: "ok", "wrong" (differs from the reference), or "failed to ..." .
        error: Why it failed or is wrong ("" when ok).
        median_ms: Median time, milliseconds (NaN when not measured).
        p25_ms: First quartile.
        p75_ms: Third quartile.
        min_ms: Fastest repetition.
        reps: Repetitions timed.
        compile_ms: Trace + lower + compile, milliseconds (not in the timings).
        flops: FLOPs per call (NaN when unknown).
        bytes: Bytes moved per call (NaN when unknown).
        tflops: Achieved TFLOP/s.
        gbps: Achieved GB/s.
        pct_of_peak: Percent of the chip's roof at this intensity (NaN on CPU or
            when the chip is unknown).
        correct: Whether the outputs match the reference (None when not checked).
        max_abs_err: Largest absolute difference from the reference.
        mode: "emulated", "interpret", "compiled" or "xla".
        note: The label this timing carries (the CPU notice on CPU).
        method: How it was timed.
        cached: Whether the timing was read from the cache instead of measured (a
            tuned config's correctness is checked again on the run at hand).
    """

    impl: str
    point: str
    size: Any = None
    x: float | None = None
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    status: str = "ok"
    error: str = ""
    median_ms: float = math.nan
    p25_ms: float = math.nan
    p75_ms: float = math.nan
    min_ms: float = math.nan
    reps: int = 0
    compile_ms: float = math.nan
    flops: float = math.nan
    bytes: float = math.nan
    tflops: float = math.nan
    gbps: float = math.nan
    pct_of_peak: float = math.nan
    correct: bool | None = None
    max_abs_err: float = math.nan
    mode: str = ""
    note: str = ""
    method: str = ""
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (NaN becomes None; the size becomes text if it is not a number)."""
        data = dataclasses.asdict(self)
        for key, value in data.items():
            if isinstance(value, float) and not math.isfinite(value):
                data[key] = None
        size = data["size"]
        if size is not None and not isinstance(size, int | float | str):
            data["size"] = str(size)
        data["config"] = {k: _jsonable(v) for k, v in self.config.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Row:
        """Reads back `to_json`'s output (None becomes NaN again)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in fields:
                continue
            default = fields[key].default
            nan_default = isinstance(default, float) and math.isnan(default)
            values[key] = math.nan if value is None and nan_default else value
        return cls(**values)


_TEXT_FIELDS = ("impl", "point", "status", "error", "mode", "note", "method")
_NUMBER_FIELDS = (
    "median_ms",
    "p25_ms",
    "p75_ms",
    "min_ms",
    "compile_ms",
    "flops",
    "bytes",
    "tflops",
    "gbps",
    "pct_of_peak",
    "max_abs_err",
)


def is_row_json(data: Any) -> bool:
    """Whether `data` reads back (`Row.from_json`) as a row with fields of the right types.

    For data from outside (the tuning cache): a damaged entry must be refused, not
    break a table or a plot later.
    """
    if not isinstance(data, dict) or not {"impl", "point"} <= set(data):
        return False

    def number(value: Any, optional: bool = True) -> bool:
        if value is None:
            return optional
        return isinstance(value, int | float) and not isinstance(value, bool)

    return (
        all(isinstance(data.get(f, ""), str) for f in _TEXT_FIELDS)
        and all(number(data.get(f)) for f in _NUMBER_FIELDS)
        and number(data.get("x"))
        and isinstance(data.get("reps", 0), int)
        and not isinstance(data.get("reps", 0), bool)
        and isinstance(data.get("config", {}), dict)
        and data.get("correct") in (None, True, False)
        and isinstance(data.get("cached", False), bool)
    )


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, int | float | str | bool) or value is None else repr(value)


def measured_row(
    impl: str,
    point: str,
    timing: harness.Timing,
    work: roofline.Work,
    *,
    peaks: tuple[float, float],
    **fields: Any,
) -> Row:
    """A row from a timing, with throughput and % of peak derived from the work."""
    seconds = timing.median_ms / 1e3
    flops = work.flops if work.flops is not None else math.nan
    nbytes = work.bytes if work.bytes is not None else math.nan
    on_cpu = timing.backend == "cpu"
    return Row(
        impl=impl,
        point=point,
        median_ms=timing.median_ms,
        p25_ms=timing.p25_ms,
        p75_ms=timing.p75_ms,
        min_ms=timing.min_ms,
        reps=timing.reps,
        compile_ms=timing.compile_ms,
        flops=flops,
        bytes=nbytes,
        tflops=flops / seconds / 1e12 if seconds > 0 else math.nan,
        gbps=nbytes / seconds / 1e9 if seconds > 0 else math.nan,
        # A CPU interpret timing says nothing about a GPU's or TPU's roof.
        pct_of_peak=math.nan if on_cpu else roofline.pct_of_peak(work, seconds, *peaks),
        mode=timing.mode,
        note=timing.note,
        method=timing.method,
        **fields,
    )


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
    return bench_points(
        fn,
        points,
        ref,
        flops=flops,
        bytes_accessed=bytes_accessed,
        chip=chip,
        check=check,
        live=live,
        settings=settings,
        seed=seed,
        title=title or f"{tracing.callable_name(fn)} vs XLA",
    )


def bench_points(
    fn: Callable[..., Any],
    points: Sequence[Point],
    ref: Callable[..., Any] | None,
    *,
    flops: float | Callable[[Any], float] | None = None,
    bytes_accessed: float | Callable[[Any], float] | None = None,
    chip: str | None = None,
    check: bool = True,
    live: bool | Observer | None = None,
    settings: harness.TimerSettings | None = None,
    seed: int = 0,
    title: str = "",
) -> pd.DataFrame:
    """`bench` over explicit points (the magic's `--bench` uses the cell's inputs)."""
    observer = resolve_live(live)
    impls = [XLA, PALLAS] if ref is not None else [PALLAS]
    # The first point's inputs set the dtype whose peak is drawn.
    dtype = _dtype_of(points[0].arguments()[0]) if points else "float32"
    context = sweep_context(
        chip, title, kind="sweep", total=len(points) * len(impls), x_label="size", dtype=dtype
    )
    shared = _Sweep(fn, ref, context, flops, bytes_accessed, check, settings, seed)
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
class SweepContext:
    """Where a sweep runs and against which roof."""

    plan: live.Plan
    chip: roofline.Chip | None

    def peaks(self, dtype: str) -> tuple[float, float]:
        """(peak FLOP/s, bandwidth) for arithmetic in `dtype`, zeros when no chip."""
        if self.chip is None:
            return 0.0, 0.0
        return self.chip.peak_flops(dtype)[0], self.chip.bandwidth


def sweep_context(
    chip: str | None,
    title: str,
    *,
    kind: str,
    total: int,
    x_label: str,
    dtype: str = "float32",
    baseline: int = 0,
) -> SweepContext:
    """The plan of a sweep: backend, device, the chip's roof for `dtype`, the CPU label."""
    backend = jax.default_backend()
    device = harness.device_name()
    found = roofline.chip_named(chip) if chip else roofline.detect_chip(device)
    peak_flops, peak_label = found.peak_flops(dtype) if found else (0.0, "")
    plan = live.Plan(
        title=title,
        kind=kind,
        total=total,
        x_label=x_label,
        note=live.CPU_LABEL if backend == "cpu" else "",
        backend=backend,
        device=device,
        chip=found.name if found else "",
        peak_flops=peak_flops,
        peak_bandwidth=found.bandwidth if found else 0.0,
        peak_label=(
            f"{peak_label}, {found.bandwidth / 1e12:.3g} TB/s ({found.spec.source})"
            if found
            else ""
        ),
        baseline=baseline,
    )
    return SweepContext(plan, found)


@dataclasses.dataclass(frozen=True)
class _Sweep:
    """What every point of one sweep shares."""

    fn: Callable[..., Any]
    ref: Callable[..., Any] | None
    context: SweepContext
    flops: float | Callable[[Any], float] | None
    bytes_accessed: float | Callable[[Any], float] | None
    check: bool
    settings: harness.TimerSettings | None
    seed: int


def _measure_point(sweep: _Sweep, point: Point, emit: Callable[[Row], None]) -> None:
    """Times the baseline, then the kernel (checked against it), at one point."""
    fn, ref, context, settings = sweep.fn, sweep.ref, sweep.context, sweep.settings
    flops, bytes_accessed = sweep.flops, sweep.bytes_accessed
    args, kwargs = materialize(point.arguments(), sweep.seed)
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
    if sweep.check and expected is not None:
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


def to_frame(rows: Sequence[Row], context: SweepContext, *, state: str) -> pd.DataFrame:
    """The rows as a DataFrame, with the sweep's context in `attrs`."""
    import pandas as pd  # noqa: PLC0415 - on the first table: tracing and timing need none

    records = []
    for row in rows:
        data = dataclasses.asdict(row)
        data.pop("x")
        config = data.pop("config")
        records.append({**config, **data})
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        frame = pd.DataFrame(columns=list(MAIN_COLUMNS))
    leading = [c for c in MAIN_COLUMNS if c in frame.columns]
    frame = frame[leading + [c for c in frame.columns if c not in leading]]
    plan = context.plan
    frame.attrs.update(
        {
            "title": plan.title,
            "note": plan.note,
            "backend": plan.backend,
            "device": plan.device,
            "chip": plan.chip,
            "peak_flops": plan.peak_flops,
            "peak_bandwidth": plan.peak_bandwidth,
            "peak_label": plan.peak_label,
            "state": state,
            "interrupted": state == "interrupted",
        }
    )
    return frame


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
