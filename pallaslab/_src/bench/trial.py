"""One config of a tuning run tried: built, traced, lowered, compiled, run, checked, timed.

Each step that fails gives a row saying which step and why; the XLA baseline is timed
with the same harness, and a cached row's correctness is checked again.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from pallaslab._src.base import messages
from pallaslab._src.bench import harness, roofline, sweep
from pallaslab._src.bench.configs import config_label
from pallaslab._src.core import programs, tiling
from pallaslab._src.core.inspection import Inspection, trace
from pallaslab._src.core.seeded import materialize
from pallaslab._src.records import ArraySpec

# Kernel backends whose lowering can be checked on a CPU-only machine, and for what.
_CROSS_LOWER = {"triton": "cuda", "mosaic_gpu": "cuda"}


@dataclasses.dataclass(frozen=True)
class Built:
    """What one config builds: the callable to time and its arguments."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


def trace_config(built: Built | str) -> Inspection | str:
    """The config's inspection, or why it could not be traced."""
    if isinstance(built, str):
        return built
    try:
        return trace(built.fn, built.args, built.kwargs)
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return _message(error)


def recheck(row: sweep.Row, built: Built, inspection: Inspection, ref: Any) -> sweep.Row:
    """A cached row whose correctness is checked again on the inputs at hand."""
    if row.impl != sweep.PALLAS or row.status not in ("ok", "wrong") or ref is None:
        return row
    try:
        prepared = harness.prepare(built.fn, built.args, built.kwargs)
        outputs = jax.block_until_ready(prepared.run())
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return dataclasses.replace(row, status="failed to run", error=messages.one_line(error))
    fields = _verdict(outputs, built, inspection, ref)
    return dataclasses.replace(
        row,
        status=fields.get("status", "ok"),
        error=fields.get("error", ""),
        correct=fields.get("correct"),
        max_abs_err=fields.get("max_abs_err", math.nan),
    )


def _verdict(outputs: Any, built: Built, inspection: Inspection, ref: Any) -> dict[str, Any]:
    """The row's fields saying whether `outputs` match the reference (and why not)."""
    fields: dict[str, Any] = {}
    try:
        expected = ref(*built.args, **built.kwargs) if callable(ref) else ref
        comparison = programs.compare_outputs(
            inspection, outputs, expected, built.args, built.kwargs
        )
        fields.update(correct=comparison.ok, max_abs_err=comparison.max_abs_err)
        if not comparison.ok:
            fields.update(
                status="wrong", error=comparison.problem or sweep.mismatch_text(comparison)
            )
    except KeyboardInterrupt:
        raise
    except Exception as error:
        fields.update(status="wrong", error=f"the reference failed: {messages.one_line(error)}")
    return fields


def build_config(
    builder: Callable[[dict[str, Any]], Built], config: dict[str, Any], seed: int
) -> Built | str:
    try:
        built = builder(dict(config))
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return _message(error)
    args, kwargs = materialize((tuple(built.args), dict(built.kwargs)), seed)
    return Built(built.fn, tuple(args), dict(kwargs))


def _message(error: BaseException) -> str:
    # Errors from a cell carry a diagnosis that names the cell line.
    diagnosis = getattr(error, "diagnosis", None)
    if diagnosis is not None and hasattr(diagnosis, "message"):
        return str(diagnosis.message())
    return messages.one_line(error)


def try_config(
    built: Built | str,
    config: dict[str, Any],
    *,
    ref: Any,
    context: sweep.SweepContext,
    settings: harness.TimerSettings | None,
    notices: list[str],
    traced: Inspection | str | None = None,
) -> tuple[sweep.Row, roofline.Work | None]:
    """Lowers, compiles, runs, checks and times one config; says where it failed."""
    label = config_label(config)

    def failed(status: str, error: str) -> tuple[sweep.Row, None]:
        return sweep.Row(sweep.PALLAS, label, config=config, status=status, error=error), None

    if isinstance(built, str):
        return failed("failed to build", built)
    if traced is None:
        traced = trace_config(built)
    if isinstance(traced, str):
        return failed("failed to trace", traced)
    inspection = traced
    for kernel, stray in tiling.stray_blocks(inspection, built.args, built.kwargs):
        return failed(
            "failed: block outside its array", f"in kernel {kernel.name}, {stray.describe()}"
        )
    if error_text := lowering_error(inspection, notices):
        return failed("failed to lower", error_text)
    try:
        prepared = harness.prepare(built.fn, built.args, built.kwargs)
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return failed("failed to compile", messages.one_line(error))
    try:
        timing, outputs = harness.measure_prepared(prepared, settings)
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return failed("failed to run", messages.one_line(error))
    fields: dict[str, Any] = {"config": config}
    if ref is not None:
        fields.update(_verdict(outputs, built, inspection, ref))
    work = roofline.program_work(inspection.kernels, inspection.args, inspection.outputs)
    peaks = context.peaks(work.dtype)
    row = sweep.measured_row(sweep.PALLAS, label, timing, work, peaks=peaks, **fields)
    return row, work


def lowering_error(inspection: Inspection, notices: list[str]) -> str:
    """On CPU: lowers kernels written for a GPU backend for CUDA; the error, or ""."""
    if jax.default_backend() != "cpu":
        return ""  # compiling for the device at hand checks the real thing
    targets = {_CROSS_LOWER[k.backend] for k in inspection.kernels if k.backend in _CROSS_LOWER}
    if any(k.backend == "mosaic_tpu" for k in inspection.kernels):
        notices.append(
            "TPU (Mosaic) lowering is not checked on CPU: configs are run in interpret mode only."
        )
    if not targets:
        return ""
    for platform in sorted(targets):
        try:
            programs.lower_for(inspection, platform)
        except TypeError as error:
            if "lowering_platforms" in str(error):
                notices.append(f"this JAX cannot lower for {platform} on CPU; lowering not checked")
                return ""
            return f"lowering for {platform}: {messages.one_line(error)}"
        except KeyboardInterrupt:
            raise
        except Exception as error:
            return f"lowering for {platform}: {messages.one_line(error)}"
    return ""


def time_baseline(
    ref: Callable[..., Any],
    built: Built,
    work: roofline.Work | None,
    context: sweep.SweepContext,
    settings: harness.TimerSettings | None,
) -> sweep.Row:
    """The reference under `jax.jit`, timed on the same inputs, with the kernels' work."""
    label = "XLA baseline"
    try:
        prepared = harness.prepare(ref, built.args, built.kwargs)
        timing, _ = harness.measure_prepared(prepared, settings)
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return sweep.Row(sweep.XLA, label, status="failed", error=messages.one_line(error))
    if work is None:
        leaves = [
            a for a in jax.tree_util.tree_leaves((built.args, built.kwargs)) if hasattr(a, "dtype")
        ]
        work = roofline.program_work(
            (),
            [ArraySpec(f"[{k}]", tuple(np.shape(a)), str(a.dtype)) for k, a in enumerate(leaves)],
            (),
            xla_cost=lambda: roofline.xla_cost_analysis(ref, [*built.args]),
        )
    return sweep.measured_row(sweep.XLA, label, timing, work, peaks=context.peaks(work.dtype))
