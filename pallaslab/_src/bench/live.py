"""How benchmarks report progress and results, without this layer importing any view.

A sweep or a tuning run tells an observer as each point finishes. Which observer
depends on where pallaslab runs: in Jupyter the top-level package registers one that
draws a live plot widget; in a terminal, `TextProgress` writes a progress line.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol, TextIO

CPU_LABEL = "CPU emulation — not representative of GPU/TPU speed"
# Mosaic GPU kernels run on a CPU in JAX's interpreter: interpreted, not emulated.
MOSAIC_GPU_LABEL = (
    "CPU interpretation (JAX's Mosaic GPU interpreter) — not representative of GPU speed"
)


def cpu_label(mode: str) -> str:
    """The label every CPU timing carries, for kernels run in `mode` (a run's mode)."""
    return MOSAIC_GPU_LABEL if mode == "mosaic-gpu-interpret" else CPU_LABEL


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a sweep is about to measure.

    Attributes:
        title: A heading ("matmul vs XLA", "tuning matmul").
        kind: "sweep" (values over sizes) or "tune" (values over configs).
        total: How many measurements it will make (impls x points).
        x_label: What the x axis holds ("size", "config").
        note: The label every timing carries (the CPU notice on CPU), or "".
        backend: The JAX backend ("cpu", "gpu", "tpu").
        device: The device's name.
        chip: The chip whose roofline is drawn (hardware table name), or "".
        peak_flops: That chip's peak FLOP/s for the dtype at hand (0 if unknown).
        peak_bandwidth: Its memory bandwidth in bytes/s (0 if unknown).
        peak_label: Where the peaks come from, in words.
        baseline: Measurements of `total` that are not configs or points: the XLA
            baseline a tuning run measures last (so progress counts configs only).
        notices: What the run will not do, and why, in words (no XLA baseline for a
            reference that is a value ...).
        roofs: Every chip of the hardware table as a roof for the dtype at hand
            (`name`, `peak_flops`, `peak_bandwidth`, `peak_label`), for the view's
            chip picker when the device is none of them.
    """

    title: str
    kind: str
    total: int
    x_label: str
    note: str
    backend: str
    device: str
    chip: str = ""
    peak_flops: float = 0.0
    peak_bandwidth: float = 0.0
    peak_label: str = ""
    baseline: int = 0
    notices: tuple[str, ...] = ()
    roofs: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The plan as plain JSON values."""
        data = dataclasses.asdict(self)
        data["notices"] = list(self.notices)
        data["roofs"] = [dict(r) for r in self.roofs]
        return data


class Observer(Protocol):
    """Receives a sweep's progress. Rows are plain JSON dicts (see `rows.Row.to_json`)."""

    def begin(self, plan: Plan) -> None:
        """Called once, before the first measurement."""

    def update(self, row: dict[str, Any], done: int) -> None:
        """Called when a measurement finishes; `done` counts those finished so far."""

    def end(self, state: str, message: str) -> None:
        """Called once: state is "finished", "interrupted" or "failed"."""


class NullObserver:
    """Reports nothing."""

    def begin(self, plan: Plan) -> None:
        """Ignores the plan."""

    def update(self, row: dict[str, Any], done: int) -> None:
        """Ignores the row."""

    def end(self, state: str, message: str) -> None:
        """Ignores the end."""


class TextProgress:
    """A one-line progress bar on a terminal, rewritten as points finish."""

    def __init__(self, stream: TextIO | None = None, width: int = 24) -> None:
        self._stream = stream or sys.stderr
        self._width = width
        self._total = 0
        self._started = 0.0
        self._title = ""

    def begin(self, plan: Plan) -> None:
        """Writes the title and the timing label."""
        self._total, self._started, self._title = plan.total, time.monotonic(), plan.title
        note = f" [{plan.note}]" if plan.note else ""
        self._write(f"{plan.title}{note}\n")
        for notice in plan.notices:
            self._write(f"  note: {notice}\n")

    def update(self, row: dict[str, Any], done: int) -> None:
        """Redraws the bar with the point just measured."""
        filled = int(self._width * done / max(self._total, 1))
        bar = "#" * filled + "-" * (self._width - filled)
        value = row.get("median_ms")
        what = f"{value:.4g} ms" if isinstance(value, float) else row.get("status", "")
        elapsed = time.monotonic() - self._started
        self._write(
            f"\r[{bar}] {done}/{self._total} {row.get('impl', '')} {row.get('point', '')}: "
            f"{what} ({elapsed:.0f} s)\x1b[K"
        )

    def end(self, state: str, message: str) -> None:
        """Ends the line with the outcome."""
        self._write(f"\n{self._title}: {state}{': ' + message if message else ''}\n")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


ObserverFactory = Callable[[], Observer | None]
_observer_factory: ObserverFactory | None = None


def register(observer_factory: ObserverFactory) -> None:
    """Sets how progress is shown by default (the top-level package: a live plot)."""
    global _observer_factory  # noqa: PLW0603
    _observer_factory = observer_factory


def default_observer() -> Observer:
    """The observer that fits the environment.

    The registered one (a live plot in Jupyter), else a progress line when stderr
    is a terminal, else nothing.
    """
    if _observer_factory is not None:
        found = _observer_factory()
        if found is not None:
            return found
    return TextProgress() if sys.stderr.isatty() else NullObserver()


def resolve(live: bool | Observer | None) -> Observer:
    """The observer a `live=` argument asks for.

    None: the default; True: the default, never silent; False: nothing; an
    observer: that one.
    """
    if live is None:
        return default_observer()
    if live is True:
        found = default_observer()
        return TextProgress() if isinstance(found, NullObserver) else found
    if live is False:
        return NullObserver()
    return live
