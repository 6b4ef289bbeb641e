"""Autotuning: try every config of a few names, keep the fastest that is right.

For each config (the product of the values given per name): build the program with
those values, trace it, lower it for its target (on CPU, kernels written for GPU are
also lowered for CUDA, so a config Triton cannot lower fails here as it would there),
compile, run, check against the reference, and time it. Configs that fail say why, at
which step. Timings are cached on disk per traced program (the kernels' jaxprs), reference,
input shapes and dtypes, device and versions, so re-running a notebook shows them without
measuring again; whether a cached config is right is checked again on every run.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.metadata
import inspect as pyinspect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from pallaslab._src.base import display, messages, version
from pallaslab._src.bench import cache as tune_cache
from pallaslab._src.bench import harness, live, roofline, sweep
from pallaslab._src.bench.live import Observer
from pallaslab._src.core import programs, tiling, tracing
from pallaslab._src.core.inspection import Inspection, trace
from pallaslab._src.core.seeded import materialize
from pallaslab._src.records import ArraySpec

if TYPE_CHECKING:
    import pandas as pd

# Kernel backends whose lowering can be checked on a CPU-only machine, and for what.
_CROSS_LOWER = {"triton": "cuda", "mosaic_gpu": "cuda"}
BASELINE_KEY = "__xla_baseline__"


@dataclasses.dataclass(frozen=True)
class Built:
    """What one config builds: the callable to time and its arguments."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


def parse_space(tokens: Sequence[str]) -> dict[str, list[Any]]:
    """`["BLOCK_M=64,128", "num_warps=4,8"]` -> `{"BLOCK_M": [64, 128], "num_warps": [4, 8]}`.

    Values are Python literals (`64`, `0.5`, `True`, `'x'`); anything else is kept as
    text.

    Raises:
        ValueError: Naming the token, when it is not `NAME=V1,V2,...`.
    """
    space: dict[str, list[Any]] = {}
    for token in tokens:
        name, sep, values = token.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not values.strip():
            raise ValueError(f"--tune takes NAME=V1,V2,... ; got {token!r}")
        if name in space:
            raise ValueError(f"--tune names {name} twice")
        space[name] = [_literal(v.strip()) for v in values.split(",") if v.strip()]
    return space


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def configs_of(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, in order (the last name varies fastest)."""
    names = list(space)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*space.values())]


def config_label(config: Mapping[str, Any]) -> str:
    """`BLOCK_M=64, BLOCK_N=128`."""
    return ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in config.items())


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """The outcome of a tuning run.

    Attributes:
        name: What was tuned.
        space: The values tried per name.
        rows: One row per config measured (impl "pallas"), and the XLA baseline
            (impl "xla") when a reference was given.
        best: The fastest config that ran and matched the reference (None if none).
        state: "finished", "interrupted" or "failed".
        plan: Where it ran, against which roof, with which timing label.
        cache_path: The cache file ("" when caching was off).
        notices: What could not be checked, and why.
    """

    name: str
    space: dict[str, tuple[Any, ...]]
    rows: tuple[sweep.Row, ...]
    best: dict[str, Any] | None
    state: str
    plan: live.Plan
    cache_path: str = ""
    notices: tuple[str, ...] = ()

    @property
    def table(self) -> pd.DataFrame:
        """The rows as a DataFrame: one per config (and the baseline), config names first."""
        frame = sweep.to_frame(self.rows, sweep.SweepContext(self.plan, None), state=self.state)
        names = [n for n in self.space if n in frame.columns]
        frame = frame.drop(columns=[c for c in ("size",) if c in frame.columns])
        rest = [c for c in frame.columns if c not in names and c != "impl"]
        return frame[["impl", *names, *rest]]

    @property
    def best_row(self) -> sweep.Row | None:
        """The row of the best config."""
        if self.best is None:
            return None
        return next(
            (r for r in self.rows if r.impl == sweep.PALLAS and r.config == self.best), None
        )

    @property
    def failed(self) -> tuple[sweep.Row, ...]:
        """Configs that could not be built, lowered, compiled or run."""
        return tuple(r for r in self.rows if r.status.startswith("failed"))

    @property
    def wrong(self) -> tuple[sweep.Row, ...]:
        """Configs that ran but do not match the reference."""
        return tuple(r for r in self.rows if r.status == "wrong")

    def summary(self) -> str:
        """The best config, then one line per config."""
        note = f" [{self.plan.note}]" if self.plan.note else ""
        head = f"tuning {self.name}: {self.state}{note}"
        best = self.best_row
        lines = [head]
        if best is not None:
            lines.append(f"  best: {best.point} ({best.median_ms:.4g} ms)")
        else:
            lines.append("  no config ran and matched the reference")
        for row in self.rows:
            if row.status == "ok":
                what = f"{row.median_ms:.4g} ms"
            else:
                what = f"{row.status}: {row.error.splitlines()[0] if row.error else ''}"
            lines.append(f"  {row.impl:6} {row.point}: {what}{' (cached)' if row.cached else ''}")
        lines += [f"  note: {n}" for n in self.notices]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle("bench", self, **kwargs)


def tune(
    build: Callable[..., Callable[..., Any]],
    space: Mapping[str, Sequence[Any]],
    *args: Any,
    ref: Any = None,
    kwargs: dict[str, Any] | None = None,
    cache: bool = True,
    retune: bool = False,
    live: bool | Observer | None = None,
    settings: harness.TimerSettings | None = None,
    chip: str | None = None,
    seed: int = 0,
) -> TuneResult:
    """Tries every config of `space`; returns the best that matches the reference.

    Args:
        build: `build(**config)` returns the callable to time for that config.
        space: Values to try per name, e.g. `{"BLOCK_M": [64, 128], "num_warps": [4, 8]}`.
        *args: The inputs (`jax.ShapeDtypeStruct`s become seeded random data).
        ref: The reference: a callable (also timed under `jax.jit` as the XLA
            baseline) or the expected output.
        kwargs: Keyword arguments for the callable.
        cache: Read and write measured configs on disk.
        retune: Measure again even configs found in the cache.
        live: Progress and a live plot (see `pallaslab.bench`).
        settings: Timer settings.
        chip: The chip whose roof to use (default: the device's).
        seed: Seed of the random inputs.

    Returns:
        The result: `.best` (the config), `.table` (a DataFrame), `.failed`.

    Example:
        >>> result = pallaslab.tune(lambda BLOCK_M, BLOCK_N: make_matmul(BLOCK_M, BLOCK_N),
        ...                         {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128]},
        ...                         a, b, ref=lambda a, b: a @ b)
        >>> result.best
        {'BLOCK_M': 128, 'BLOCK_N': 64}
    """
    _check_names(build, space)
    call_kwargs = dict(kwargs or {})

    def builder(config: dict[str, Any]) -> Built:
        return Built(build(**config), tuple(args), call_kwargs)

    return tune_configs(
        builder,
        space,
        ref=ref,
        name=tracing.callable_name(build),
        cache=cache,
        retune=retune,
        live=live,
        settings=settings,
        chip=chip,
        seed=seed,
    )


def _check_names(build: Callable[..., Any], space: Mapping[str, Sequence[Any]]) -> None:
    try:
        parameters = pyinspect.signature(build).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return
    unknown = [n for n in space if n not in parameters]
    if unknown:
        takes = ", ".join(parameters) or "nothing"
        raise ValueError(f"build does not take {', '.join(unknown)}; it takes {takes}")
    empty = [n for n, values in space.items() if not list(values)]
    if empty:
        raise ValueError(f"no values to try for {', '.join(empty)}")


def tune_configs(
    builder: Callable[[dict[str, Any]], Built],
    space: Mapping[str, Sequence[Any]],
    *,
    ref: Any,
    name: str,
    cache: bool = True,
    retune: bool = False,
    live: bool | Observer | None = None,
    settings: harness.TimerSettings | None = None,
    chip: str | None = None,
    seed: int = 0,
    cache_dir: Any = None,
    cache_key: dict[str, Any] | None = None,
) -> TuneResult:
    """Tunes over configs that `builder` turns into programs (the magic's `--tune`).

    Every config is built and traced; the cache is keyed on what was traced (the
    program's jaxpr, kernels included, and its constants), on the reference (its
    jaxpr, or its values), on the inputs' shapes and dtypes, the device and the
    versions of jax, jaxlib and pallaslab, so a kernel redefined since is measured
    again. A cached config's timing is reused, but its correctness is checked again
    on the inputs at hand. `cache_key` adds to the key (e.g. a forced interpret mode).
    """
    configs = configs_of(space)
    if not configs:
        raise ValueError("nothing to tune: give at least one value per name")
    observer = sweep.resolve_live(live)
    baseline = 1 if callable(ref) else 0
    context = sweep.sweep_context(
        chip,
        f"tuning {name}",
        kind="tune",
        total=len(configs) + baseline,
        x_label="config",
        baseline=baseline,
    )
    rows: list[sweep.Row] = []
    notices: list[str] = []
    store: tune_cache.TuneCache | None = None
    stored: dict[str, dict[str, Any]] = {}
    fresh: dict[str, dict[str, Any]] = {}
    state, message = "finished", ""
    reference = ""

    def emit(row: sweep.Row) -> None:
        rows.append(row)
        observer.update(row.to_json(), len(rows))

    observer.begin(context.plan)
    baseline_args: Built | None = None
    baseline_work: roofline.Work | None = None
    try:
        for config in configs:
            built = _build(builder, config, seed)
            traced = _trace(built)
            if isinstance(built, Built) and baseline_args is None:
                baseline_args = built
            if store is None and cache and isinstance(built, Built):
                # Keyed on the inputs and the reference, known once a config is built.
                reference = _reference_digest(ref, built)
                key_of_run = {**_cache_key(built, context), **(cache_key or {})}
                store = tune_cache.TuneCache(key_of_run, cache_dir, valid=sweep.is_row_json)
                stored = {} if retune else store.load()
            key = _entry_key(config, traced, reference) if isinstance(traced, Inspection) else ""
            cached = _cached_row(stored, key)
            if cached is not None and isinstance(built, Built) and isinstance(traced, Inspection):
                # Timings may come from the cache; whether it is right may not.
                emit(_recheck(cached, built, traced, ref))
                continue
            row, work = _try_config(
                built,
                config,
                ref=ref,
                context=context,
                settings=settings,
                notices=notices,
                traced=traced,
            )
            if work is not None and baseline_work is None:
                baseline_work = work
            emit(row)
            if key:
                fresh[key] = row.to_json()
        if callable(ref):
            baseline_key = f"{BASELINE_KEY}:{reference}"
            cached = _cached_row(stored, baseline_key)
            if cached is not None:
                emit(cached)
            else:
                if baseline_args is None:
                    found = _build(builder, configs[0], seed)
                    baseline_args = found if isinstance(found, Built) else None
                if baseline_args is not None:
                    row = _baseline(ref, baseline_args, baseline_work, context, settings)
                    emit(row)
                    if row.status == "ok" and reference:
                        fresh[baseline_key] = row.to_json()
    except KeyboardInterrupt:
        state, message = "interrupted", f"kept the {len(rows)} result(s) so far"
    finally:
        if store is not None and fresh:
            store.store(fresh)
    best = _best(rows)
    if best is not None:
        message = message or f"best: {config_label(best)}"
    observer.end(state, message)
    return TuneResult(
        name=name,
        space={k: tuple(v) for k, v in space.items()},
        rows=tuple(rows),
        best=best,
        state=state,
        plan=context.plan,
        cache_path=str(store.path) if store is not None else "",
        notices=tuple(dict.fromkeys(notices)),
    )


def _cached_row(stored: dict[str, dict[str, Any]], key: str) -> sweep.Row | None:
    """The stored row of an entry, marked cached; None when absent or damaged."""
    entry = stored.get(key) if key else None
    if not isinstance(entry, dict):
        return None
    try:
        return dataclasses.replace(sweep.Row.from_json(entry), cached=True)
    except Exception:  # a damaged entry is measured again
        return None


def _trace(built: Built | str) -> Inspection | str:
    """The config's inspection, or why it could not be traced."""
    if isinstance(built, str):
        return built
    try:
        return trace(built.fn, built.args, built.kwargs)
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return _message(error)


def _recheck(row: sweep.Row, built: Built, inspection: Inspection, ref: Any) -> sweep.Row:
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


def _build(
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


def _cache_key(built: Built, context: sweep.SweepContext) -> dict[str, Any]:
    """What a cache file is for: input shapes and dtypes, device, versions."""
    leaves = jax.tree_util.tree_leaves((built.args, built.kwargs))
    inputs = [
        [list(np.shape(leaf)), str(leaf.dtype)] if hasattr(leaf, "dtype") else _static(leaf)
        for leaf in leaves
    ]
    return {
        "inputs": inputs,
        "backend": context.plan.backend,
        "device": context.plan.device,
        "jax": jax.__version__,
        "jaxlib": _version("jaxlib"),
        "pallaslab": version.__version__,
    }


def _entry_key(config: dict[str, Any], inspection: Inspection, reference: str) -> str:
    """A config's entry: its values, the program traced for it, the reference."""
    return tune_cache.digest(
        {
            "config": tune_cache.config_key(config),
            "program": programs.fingerprint(inspection),
            "reference": reference,
        }
    )


def _reference_digest(ref: Any, built: Built) -> str:
    """The reference as traced on the inputs (its jaxpr), else its values."""
    if ref is None:
        return ""
    if callable(ref):
        try:
            return programs.callable_fingerprint(ref, built.args, built.kwargs)
        except Exception:  # not traceable (NumPy inside): what it returns, then
            try:
                return "values:" + programs.values_digest(ref(*built.args, **built.kwargs))
            except Exception as error:
                return "failed:" + messages.one_line(error)
    return "values:" + programs.values_digest(ref)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _static(leaf: Any) -> Any:
    return (
        leaf if isinstance(leaf, int | float | str | bool) or leaf is None else type(leaf).__name__
    )


def _try_config(
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
        traced = _trace(built)
    if isinstance(traced, str):
        return failed("failed to trace", traced)
    inspection = traced
    for kernel, stray in tiling.stray_blocks(inspection, built.args, built.kwargs):
        return failed(
            "failed: block outside its array", f"in kernel {kernel.name}, {stray.describe()}"
        )
    if error_text := _lowering_error(inspection, notices):
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


def _lowering_error(inspection: Inspection, notices: list[str]) -> str:
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


def _baseline(
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


def _best(rows: Sequence[sweep.Row]) -> dict[str, Any] | None:
    candidates = [
        r
        for r in rows
        if r.impl == sweep.PALLAS
        and r.status == "ok"
        and r.correct is not False
        and math.isfinite(r.median_ms)
    ]
    if not candidates:
        return None
    return dict(min(candidates, key=lambda r: r.median_ms).config)
