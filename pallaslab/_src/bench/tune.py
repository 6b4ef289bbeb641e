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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pallaslab._src.bench import cache as tune_cache
from pallaslab._src.bench import harness, roofline, sweep
from pallaslab._src.bench.cluster.spec import Cluster, ClusterError, cluster_spec
from pallaslab._src.bench.configs import check_names, config_label, configs_of, parse_space
from pallaslab._src.bench.live import Observer
from pallaslab._src.bench.plan import no_baseline_notice
from pallaslab._src.bench.trial import (
    Built,
    build_config,
    recheck,
    time_baseline,
    trace_config,
    try_config,
)
from pallaslab._src.bench.tunekeys import (
    BASELINE_KEY,
    cached_row,
    entry_key,
    file_key,
    local_measurer,
    reference_digest,
)
from pallaslab._src.bench.tuneoptions import TuneOptions
from pallaslab._src.bench.tuneresult import TuneResult, best_config
from pallaslab._src.core import tracing
from pallaslab._src.core.inspection import Inspection

__all__ = [
    "Built",
    "Cluster",
    "ClusterError",
    "TuneOptions",
    "TuneResult",
    "config_label",
    "configs_of",
    "parse_space",
    "tune",
    "tune_configs",
]


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
    cluster: str | Cluster | None = None,
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
        cluster: Tune on a Ray cluster instead of here: its address ("head:6379"),
            "local" (a Ray on this machine), or `pallaslab.Cluster(...)` (which chip
            kinds, compile target, shared cache). Each config is traced here, then
            compiled on the cluster's CPUs and timed and checked on each chip kind;
            rows say which (`chip`) and `best` is the first kind's. Needs
            `pip install 'pallaslab[cluster]'`.

    Returns:
        The result: `.best` (the config), `.table` (a DataFrame), `.failed`.

    Raises:
        ClusterError: For a cluster that cannot be used (no Ray, no such cluster or
            chip kind, other versions on its hosts), in one message.

    Example:
        >>> result = pallaslab.tune(lambda BLOCK_M, BLOCK_N: make_matmul(BLOCK_M, BLOCK_N),
        ...                         {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128]},
        ...                         a, b, ref=lambda a, b: a @ b)
        >>> result.best
        {'BLOCK_M': 128, 'BLOCK_N': 64}
    """
    check_names(build, space)
    spec = cluster_spec(cluster)  # before anything runs: a missing extra says so at once
    call_kwargs = dict(kwargs or {})

    def builder(config: dict[str, Any]) -> Built:
        return Built(build(**config), tuple(args), call_kwargs)

    return tune_configs(
        builder,
        space,
        ref=ref,
        name=tracing.callable_name(build),
        options=TuneOptions(cache, retune, live, settings, chip, seed, cluster=spec),
    )


def tune_configs(
    builder: Callable[[dict[str, Any]], Built],
    space: Mapping[str, Sequence[Any]],
    *,
    ref: Any,
    name: str,
    options: TuneOptions | None = None,
) -> TuneResult:
    """Tunes over configs that `builder` turns into programs (the magic's `--tune`).

    Every config is built and traced; the cache is keyed on what was traced (the
    program's jaxpr, kernels included, and its constants), on the reference (its
    jaxpr, or its values), on the inputs' shapes and dtypes, the device and the
    versions of jax, jaxlib and pallaslab, so a kernel redefined since is measured
    again. A cached config's timing is reused, but its correctness is checked again
    on the inputs at hand. `options.cache_key` adds to the key (e.g. a forced interpret
    mode).
    """
    options = options or TuneOptions()
    configs = configs_of(space)
    if not configs:
        raise ValueError("nothing to tune: give at least one value per name")
    spec = cluster_spec(options.cluster)
    if spec is not None:
        from pallaslab._src.bench.cluster.tuning import tune_on_cluster  # noqa: PLC0415 - Ray

        return tune_on_cluster(builder, space, ref=ref, name=name, options=options, spec=spec)
    observer = sweep.resolve_live(options.live)
    baseline = 1 if callable(ref) else 0
    # A reference that is a value checks every config, but there is no XLA to time.
    unmeasured = no_baseline_notice(ref)
    context = sweep.sweep_context(
        options.chip,
        f"tuning {name}",
        kind="tune",
        total=len(configs) + baseline,
        x_label="config",
        baseline=baseline,
        notices=unmeasured,
    )
    rows: list[sweep.Row] = []
    notices: list[str] = list(unmeasured)
    store: tune_cache.LayeredCache | None = None
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
            built = build_config(builder, config, options.seed)
            traced = trace_config(built)
            if isinstance(built, Built) and baseline_args is None:
                baseline_args = built
            if store is None and options.cache and isinstance(built, Built):
                # Keyed on the inputs and the reference, known once a config is built.
                reference = reference_digest(ref, built)
                key_of_run = {
                    **file_key(built, local_measurer(context)),
                    **(options.cache_key or {}),
                }
                store = tune_cache.layered(key_of_run, options.cache_dir, valid=sweep.is_row_json)
                stored = {} if options.retune else store.load()
            key = entry_key(config, traced, reference) if isinstance(traced, Inspection) else ""
            cached = cached_row(stored, key)
            if cached is not None and isinstance(built, Built) and isinstance(traced, Inspection):
                # Timings may come from the cache; whether it is right may not.
                emit(recheck(cached, built, traced, ref))
                continue
            row, work = try_config(
                built,
                config,
                ref=ref,
                context=context,
                settings=options.settings,
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
            cached = cached_row(stored, baseline_key)
            if cached is not None:
                emit(cached)
            else:
                if baseline_args is None:
                    found = build_config(builder, configs[0], options.seed)
                    baseline_args = found if isinstance(found, Built) else None
                if baseline_args is not None:
                    row = time_baseline(
                        ref, baseline_args, baseline_work, context, options.settings
                    )
                    emit(row)
                    if row.status == "ok" and reference:
                        fresh[baseline_key] = row.to_json()
    except KeyboardInterrupt:
        state, message = "interrupted", f"kept the {len(rows)} result(s) so far"
    finally:
        if store is not None and fresh:
            store.store(fresh)
    best = best_config(rows)
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
