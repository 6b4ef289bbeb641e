"""One measurement as a row: its fields, its JSON (for the cache), and rows as a DataFrame."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pallaslab._src.bench import harness, roofline
from pallaslab._src.bench.plan import SweepContext

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
        chip: The chip kind that measured it, on a cluster ("H100"; "" locally).
        worker: The cluster worker that measured it ("" locally).
        retries: How often it was tried again after its worker was lost.
        retry_reason: Why it was last tried again ("" when it was not).
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
    chip: str = ""
    worker: str = ""
    retries: int = 0
    retry_reason: str = ""

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


_TEXT_FIELDS = (
    "impl",
    "point",
    "status",
    "error",
    "mode",
    "note",
    "method",
    "chip",
    "worker",
    "retry_reason",
)
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
        and all(
            isinstance(data.get(f, 0), int) and not isinstance(data.get(f, 0), bool)
            for f in ("reps", "retries")
        )
        and isinstance(data.get("config", {}), dict)
        and data.get("correct") in (None, True, False)
        and isinstance(data.get("cached", False), bool)
    )


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, int | float | str | bool) or value is None else repr(value)


# Who measured, and retries: a cluster's (left out of a local table).
_CLUSTER_COLUMNS = ("chip", "worker", "retries", "retry_reason")

# What a row copies from its timing, under the same names.
_FROM_TIMING = (
    "median_ms",
    "p25_ms",
    "p75_ms",
    "min_ms",
    "reps",
    "compile_ms",
    "mode",
    "note",
    "method",
)


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
        flops=flops,
        bytes=nbytes,
        tflops=flops / seconds / 1e12 if seconds > 0 else math.nan,
        gbps=nbytes / seconds / 1e9 if seconds > 0 else math.nan,
        # A CPU interpret timing says nothing about a GPU's or TPU's roof.
        pct_of_peak=math.nan if on_cpu else roofline.pct_of_peak(work, seconds, *peaks),
        **{name: getattr(timing, name) for name in _FROM_TIMING},
        **fields,
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
    # A cluster's columns, only where a cluster measured.
    unused = [c for c in _CLUSTER_COLUMNS if c in frame.columns and not frame[c].astype(bool).any()]
    frame = frame.drop(columns=unused)
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
