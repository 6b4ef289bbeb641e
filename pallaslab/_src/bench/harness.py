"""Timing one callable: inputs on the device, compile apart, warm-up, a stable median.

The recipe, in order:
1. Array arguments are placed on the device (`jax.device_put`) and waited for, so no
   host-to-device copy is timed.
2. The call is traced, lowered and compiled ahead of time (`jit(...).lower().compile()`,
   or taken from pallaslab's compile cache when the same program was compiled before);
   that time is reported as `compile_ms`, never mixed into the samples. The first
   run of the compiled program is timed apart too (`first_run_ms`).
3. Warm-up: at least `warmup` calls and `warmup_s` seconds.
4. Repetitions, each `perf_counter` around the call and `block_until_ready`, until
   the median's standard error is under `precision` (relative), or the time budget
   or `max_reps` is spent; at least `min_reps`.
5. On GPU, between repetitions, a buffer twice the L2 cache is rewritten (so every
   repetition reads its inputs from HBM, as in a real model step), and the kernels
   are timed on the device with CUPTI where JAX's Mosaic GPU extension offers it.

On CPU, Pallas kernels run in interpret mode: every timing there carries
`live.CPU_LABEL`, and no speedup should be read from it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pallaslab._src.bench import live, roofline
from pallaslab._src.core import calls
from pallaslab._src.core.calls import PreparedCall, device_name, prepare

# The harness times what the core prepares (`core/calls.py`): both are its API.
__all__ = [
    "QUICK",
    "PreparedCall",
    "TimerSettings",
    "Timing",
    "device_name",
    "measure",
    "measure_prepared",
    "median_error",
    "prepare",
]


@dataclasses.dataclass(frozen=True)
class TimerSettings:
    """How long and how often to measure.

    Attributes:
        warmup: Warm-up calls, at least.
        warmup_s: Warm-up time, at least (seconds).
        min_reps: Timed repetitions, at least.
        max_reps: Timed repetitions, at most.
        budget_s: Stop adding repetitions after this long (seconds), stable or not.
        precision: Stop once the median's standard error is below this fraction of
            the median.
        l2_flush: Flush the L2 cache between repetitions (None: on GPU only).
        device_timer: Time kernels on the device with CUPTI (None: on GPU, where
            available).
        flush_bytes: Bytes rewritten by an L2 flush (None: twice the detected chip's
            L2, or 256 MiB when the chip is unknown).
    """

    warmup: int = 3
    warmup_s: float = 0.05
    min_reps: int = 5
    max_reps: int = 1000
    budget_s: float = 2.0
    precision: float = 0.01
    l2_flush: bool | None = None
    device_timer: bool | None = None
    flush_bytes: int | None = None


QUICK = TimerSettings(warmup=1, warmup_s=0.0, min_reps=3, max_reps=20, budget_s=0.3)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Repeated timings of one call.

    Attributes:
        samples_ms: Each repetition's time, milliseconds (device time when
            `method` says so, else wall clock).
        compile_ms: Tracing, lowering and compiling, milliseconds (not in samples).
        first_run_ms: The first run after compiling (not in samples).
        warmup: Warm-up calls made.
        method: How samples were taken, in words.
        l2_flush: Whether the L2 cache was flushed between repetitions.
        backend: "cpu", "gpu" or "tpu".
        device: The device's name.
        mode: How Pallas kernels ran ("emulated" or "interpret" on CPU, "compiled"
            on GPU/TPU), or "xla" for a program without Pallas kernels.
        note: The label this timing must carry ("" on GPU/TPU).
        notices: What could not be done as asked, and why.
        wall_samples_ms: Wall-clock samples, when `samples_ms` are device times.
    """

    samples_ms: tuple[float, ...]
    compile_ms: float
    first_run_ms: float
    warmup: int
    method: str
    l2_flush: bool
    backend: str
    device: str
    mode: str
    note: str = ""
    notices: tuple[str, ...] = ()
    wall_samples_ms: tuple[float, ...] = ()

    @property
    def reps(self) -> int:
        """How many repetitions were timed."""
        return len(self.samples_ms)

    @property
    def median_ms(self) -> float:
        """The median, milliseconds."""
        return float(np.median(self.samples_ms))

    @property
    def p25_ms(self) -> float:
        """The first quartile, milliseconds."""
        return float(np.percentile(self.samples_ms, 25))

    @property
    def p75_ms(self) -> float:
        """The third quartile, milliseconds."""
        return float(np.percentile(self.samples_ms, 75))

    @property
    def min_ms(self) -> float:
        """The fastest repetition, milliseconds."""
        return float(min(self.samples_ms))

    @property
    def median_error(self) -> float:
        """The median's standard error relative to the median (from the IQR)."""
        return median_error(self.samples_ms)

    def __str__(self) -> str:
        label = f" [{self.note}]" if self.note else ""
        return (
            f"median {self.median_ms:.4g} ms (IQR {self.p25_ms:.4g}..{self.p75_ms:.4g}, "
            f"{self.reps} reps, compile {self.compile_ms:.0f} ms, {self.method}){label}"
        )


def median_error(samples: Sequence[float]) -> float:
    """Standard error of the median over the median, estimated from the IQR.

    For a normal spread, sigma = IQR / 1.349 and the median's standard error is
    1.2533 sigma / sqrt(n); the IQR keeps outliers (a GC pause) from inflating it.
    """
    n = len(samples)
    if n < 2:
        return math.inf
    q25, q50, q75 = np.percentile(samples, [25, 50, 75])
    if q50 <= 0:
        return math.inf
    return float(1.2533 * (q75 - q25) / 1.349 / math.sqrt(n) / q50)


def measure(
    fn: Callable[..., Any], *args: Any, settings: TimerSettings | None = None, **kwargs: Any
) -> Timing:
    """Times `fn(*args, **kwargs)` with pallaslab's harness (see the module's recipe).

    Example:
        >>> timing = pallaslab.measure(matmul, a, b)
        >>> timing.median_ms, timing.p25_ms, timing.p75_ms, timing.compile_ms
    """
    return measure_prepared(prepare(fn, args, kwargs), settings)[0]


def measure_prepared(
    prepared: PreparedCall, settings: TimerSettings | None = None
) -> tuple[Timing, Any]:
    """Times a prepared call; returns the timing and the first run's outputs."""
    settings = settings or TimerSettings()
    run = prepared.run
    notices: list[str] = []
    started = time.perf_counter()
    outputs = jax.block_until_ready(run())
    first_run_ms = (time.perf_counter() - started) * 1e3

    warm, warm_started = 0, time.perf_counter()
    while warm < settings.warmup or time.perf_counter() - warm_started < settings.warmup_s:
        jax.block_until_ready(run())
        warm += 1

    on_gpu = prepared.backend == "gpu"
    flush = (
        _l2_flush(settings, notices)
        if (settings.l2_flush or (settings.l2_flush is None and on_gpu))
        else None
    )
    samples: list[float] = []
    loop_started = time.perf_counter()
    while len(samples) < settings.max_reps:
        if flush is not None:
            flush()
        t0 = time.perf_counter()
        jax.block_until_ready(run())
        samples.append((time.perf_counter() - t0) * 1e3)
        if len(samples) < settings.min_reps:
            continue
        if median_error(samples) <= settings.precision:
            break
        if time.perf_counter() - loop_started >= settings.budget_s:
            notices.append(
                f"stopped after {len(samples)} repetitions ({settings.budget_s:g} s budget); "
                f"the median's standard error is {median_error(samples):.1%}"
            )
            break
    method = "wall clock: perf_counter around the call and block_until_ready"
    wall: tuple[float, ...] = ()
    want_device = settings.device_timer or (settings.device_timer is None and on_gpu)
    if want_device:
        device_samples = _device_samples(run, flush, len(samples), notices)
        if device_samples is not None:
            wall, samples = tuple(samples), device_samples
            method = "device: CUPTI kernel time (all kernels of one call)"
    return (
        Timing(
            samples_ms=tuple(samples),
            compile_ms=prepared.compile_ms,
            first_run_ms=first_run_ms,
            warmup=warm,
            method=method + (", L2 flushed between repetitions" if flush else ""),
            l2_flush=flush is not None,
            backend=prepared.backend,
            device=prepared.device,
            mode=prepared.mode,
            note=live.cpu_label(prepared.mode) if prepared.backend == "cpu" else "",
            notices=tuple(notices),
            wall_samples_ms=wall,
        ),
        outputs,
    )


class _L2Flush:
    """Rewrites a buffer larger than the L2 cache, evicting what a repetition left."""

    def __init__(self, nbytes: int) -> None:
        self._buffer = jnp.zeros((max(nbytes // 4, 1),), jnp.int32)
        self._touch = jax.jit(lambda b: b + 1, donate_argnums=0)

    def __call__(self) -> None:
        self._buffer = jax.block_until_ready(self._touch(self._buffer))


def _l2_flush(settings: TimerSettings, notices: list[str]) -> _L2Flush | None:
    nbytes = settings.flush_bytes
    if nbytes is None:
        chip = roofline.detect_chip(device_name())
        l2 = getattr(chip.spec, "l2_bytes", 0) if chip else 0
        nbytes = 2 * l2 if l2 else 256 * 1024 * 1024
    try:
        flush = _L2Flush(nbytes)
        flush()
    except Exception as error:  # e.g. out of device memory
        notices.append(f"no L2 flush: {type(error).__name__}: {error}")
        return None
    return flush


def _device_samples(
    run: Callable[[], Any], flush: _L2Flush | None, reps: int, notices: list[str]
) -> list[float] | None:
    """Per-repetition device time of the call's kernels, via CUPTI (None if unavailable)."""
    if notice := calls.kernel_timer_notice():
        notices.append(notice)
        return None
    reps = max(1, min(reps, 200))
    try:
        with calls.kernel_times() as call_kernels:
            jax.block_until_ready(run())
        flush_kernels: list[tuple[str, float]] = []
        if flush is not None:
            with calls.kernel_times() as flush_kernels:
                flush()
        with calls.kernel_times() as times:
            for _ in range(reps):
                if flush is not None:
                    flush()
                jax.block_until_ready(run())
    except Exception as error:
        notices.append(f"device timer failed ({type(error).__name__}: {error}); wall clock used")
        return None
    per_call, per_flush = len(call_kernels), len(flush_kernels)
    period = per_call + per_flush
    if per_call == 0 or len(times) != reps * period:
        notices.append(
            f"device timer saw {len(times)} kernels for {reps} repetitions of {per_call} "
            f"(+{per_flush} flush); wall clock used"
        )
        return None
    return [
        sum(ms for _, ms in times[r * period + per_flush : (r + 1) * period]) for r in range(reps)
    ]
