"""A tuning run on a Ray cluster: every config, on every chip kind, as the cluster frees up.

Here, in the notebook, each config is built and traced (closures, higher-order kernels
and compile-time Python resolved as in a local run), then exported for each chip
kind's platform (`core.shipping`); the inputs go to Ray's object store once. Each
config then becomes a pipeline per chip kind (`dispatch`): compiled on a CPU worker
for the chip when the chip has a compile target (`xla-gpu:<chip>`, `tpu-compile:<chip>`),
then timed and checked against the reference on a worker of that kind. Rows reach
the live plot and table as they arrive, with each worker's progress.

The cache is the local tuning cache (and the shared one, when set), keyed as a local
run's plus who measured: one file per chip kind, never shared between two, so a
notebook on an H100 reuses a cluster's H100 timings and no other's. A cached config is
still checked again, on a worker of its chip kind.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import ray

from pallaslab._src.base import messages
from pallaslab._src.bench import cache as tune_cache
from pallaslab._src.bench import live, roofline, sweep
from pallaslab._src.bench.cluster import connect
from pallaslab._src.bench.cluster.dispatch import WORKER_FAILURES, Arrival, Dispatcher, Pipeline
from pallaslab._src.bench.cluster.spec import Cluster, ClusterError
from pallaslab._src.bench.cluster.work import CompileJob, TimeJob
from pallaslab._src.bench.configs import config_label, configs_of
from pallaslab._src.bench.trial import Built, build_config, lowering_error, trace_config
from pallaslab._src.bench.tunekeys import (
    BASELINE_KEY,
    cached_row,
    entry_key,
    file_key,
    reference_digest,
)
from pallaslab._src.bench.tuneoptions import TuneOptions
from pallaslab._src.bench.tuneresult import TuneResult, best_config
from pallaslab._src.core import programs, shipping, tiling
from pallaslab._src.records.targets import XLA_GPU_CHIPS

BASELINE_LABEL = "XLA baseline"
# How long the loop waits for a row before it looks again.
_POLL_S = 0.2


@dataclasses.dataclass(frozen=True)
class ClusterStats:
    """How the cluster served the last run (benchmarks and tests read it).

    Attributes:
        tasks: Rows that came back from workers.
        busy_s: Seconds the workers spent on them (their own measure).
        mean_latency_s: Mean time from a task's submission to its row.
        wall_s: The whole run, connecting included.
        submitted: Pipelines submitted (retries included).
        cancelled: The tasks an interrupt cancelled (Ray object refs).
        driver_s: Seconds this process spent building, tracing and exporting configs
            (serial: it bounds how fast configs reach the workers).
    """

    tasks: int
    busy_s: float
    mean_latency_s: float
    wall_s: float
    submitted: int = 0
    cancelled: tuple[Any, ...] = ()
    driver_s: float = 0.0


#: The last cluster run's figures.
last_stats: ClusterStats | None = None


def tune_on_cluster(
    builder: Callable[[dict[str, Any]], Built],
    space: Mapping[str, Sequence[Any]],
    *,
    ref: Any,
    name: str,
    options: TuneOptions,
    spec: Cluster,
) -> TuneResult:
    """Tunes on the cluster `spec` names (see the module's docstring); `tune_configs`' twin.

    Raises:
        ClusterError: When the cluster cannot be reached or lacks the chips asked for.
    """
    global last_stats  # noqa: PLW0603 - the run's figures, for benchmarks and tests
    started = time.perf_counter()
    if spec.compile not in (None, "auto"):
        try:
            shipping.compile_platform(str(spec.compile))
        except ValueError as error:
            raise ClusterError(f"Cluster(compile=...): {messages.error_text(error)}") from None
    configs = configs_of(space)
    observer = sweep.resolve_live(options.live)
    where = connect.connect(spec)
    run = _Sweep(
        connect.find_places(spec), builder, ref, options=options, spec=spec, observer=observer
    )
    baselines = len(run.places) if callable(ref) else 0
    context = _context(run.places, options.chip, f"tuning {name} on {where}")
    plan = dataclasses.replace(
        context.plan, total=len(configs) * len(run.places) + baselines, baseline=baselines
    )
    state, message = "finished", ""
    observer.begin(plan)
    try:
        for config in configs:
            run.dispatcher.poll(0)
            submitting = time.perf_counter()
            run.submit_config(config)
            run.driver_s += time.perf_counter() - submitting
        if callable(ref) and run.first is not None:
            for place in run.places:
                run.submit_baseline(place)
        while run.dispatcher.pending:
            run.dispatcher.poll(_POLL_S)
    except KeyboardInterrupt:
        cancelled = run.dispatcher.cancel_all()
        state, message = "interrupted", f"kept the {len(run.rows)} result(s) so far"
        run.notices.append(
            f"interrupted: {cancelled} config{'s' if cancelled != 1 else ''} not finished "
            "were cancelled on the cluster"
        )
    except BaseException:
        run.dispatcher.cancel_all()
        raise
    finally:
        run.store()
    run.notices.extend(run.dispatcher.compile_notices)
    labels = tuple(p.label for p in run.places)
    best = best_config(run.rows, labels[0])
    if best is not None and not message:
        message = f"best on {labels[0]}: {config_label(best)}"
    observer.end(state, message)
    last_stats = run.stats(started)
    first_store = run.stores.get(labels[0])
    return TuneResult(
        name=name,
        space={k: tuple(v) for k, v in space.items()},
        rows=tuple(run.rows),
        best=best,
        state=state,
        plan=plan,
        cache_path=str(first_store.path) if first_store is not None else "",
        notices=tuple(dict.fromkeys(run.notices)),
        chips=labels,
    )


class _Sweep:
    """One cluster tuning run: what it sends, what came back, what it caches."""

    def __init__(
        self,
        places: list[connect.Place],
        builder: Callable[[dict[str, Any]], Built],
        ref: Any,
        *,
        options: TuneOptions,
        spec: Cluster,
        observer: live.Observer,
    ) -> None:
        self.places = places
        self.builder, self.ref, self.options, self.spec = builder, ref, options, spec
        self.observer = observer
        self.rows: list[sweep.Row] = []
        self.notices: list[str] = []
        self.stores: dict[str, tune_cache.LayeredCache] = {}
        self.stored: dict[str, dict[str, dict[str, Any]]] = {}
        self.fresh: dict[str, dict[str, dict[str, Any]]] = {}
        self.inputs: dict[str, Any] = {}  # inputs' digest -> Ray object
        self.expected: dict[str, Any] = {}  # inputs' digest -> Ray object of ref's values
        self.references: dict[tuple[str, str], shipping.Shipped | None] = {}
        self.reference = ""
        self.first: Built | None = None
        self.first_work: roofline.Work | None = None
        self.last_inputs: tuple[tuple[int, ...], str] = ((), "")
        self.busy_s = 0.0
        self.driver_s = 0.0
        self.latency_s: list[float] = []
        self.dispatcher = Dispatcher(spec.retries, self.arrived, self.workers)

    # -- what comes back ----------------------------------------------------------------

    def emit(self, row: sweep.Row) -> None:
        self.rows.append(row)
        self.observer.update(row.to_json(), len(self.rows))

    def arrived(self, arrival: Arrival) -> None:
        self.busy_s += arrival.busy_s
        self.latency_s.append(arrival.latency_s)
        row, key = arrival.row, arrival.pipeline.key
        self.emit(row)
        # As a local run caches every config it tried, save what only the worker knew.
        if key and not row.cached and row.status not in WORKER_FAILURES:
            entry = dataclasses.replace(row, retries=0, retry_reason="", worker="").to_json()
            self.fresh.setdefault(arrival.pipeline.place.label, {})[key] = entry

    def workers(self, states: list[dict[str, Any]], compiled: int) -> None:
        report = getattr(self.observer, "workers", None)
        if callable(report):
            report(states, compiled)

    def store(self) -> None:
        for label, entries in self.fresh.items():
            if label in self.stores and entries:
                self.stores[label].store(entries)

    def stats(self, started: float) -> ClusterStats:
        tasks = len(self.latency_s)
        return ClusterStats(
            tasks=tasks,
            busy_s=self.busy_s,
            mean_latency_s=sum(self.latency_s) / tasks if tasks else math.nan,
            wall_s=time.perf_counter() - started,
            submitted=self.dispatcher.submitted,
            cancelled=tuple(self.dispatcher.cancelled),
            driver_s=self.driver_s,
        )

    # -- what is sent -------------------------------------------------------------------

    def submit_config(self, config: dict[str, Any]) -> None:
        """Builds and traces one config here, then submits it for every chip kind."""
        label = config_label(config)

        def failed(place: connect.Place | None, status: str, error: str) -> None:
            for where in [place] if place is not None else self.places:
                row = sweep.Row(sweep.PALLAS, label, config=config, status=status, error=error)
                self.emit(dataclasses.replace(row, chip=where.label))

        built = build_config(self.builder, config, self.options.seed)
        traced = trace_config(built)
        if isinstance(built, str):
            failed(None, "failed to build", built)
            return
        if isinstance(traced, str):
            failed(None, "failed to trace", traced)
            return
        for kernel, stray in tiling.stray_blocks(traced, built.args, built.kwargs):
            where = f"in kernel {kernel.name}, {stray.describe()}"
            failed(None, "failed: block outside its array", where)
            return
        if self.first is None:
            self.first_config(built)
        key = entry_key(config, traced, self.reference) if self.options.cache else ""
        digest, inputs = self.put_inputs(built)
        placements = programs.output_placements(traced, built.args, built.kwargs)
        work = roofline.program_work(traced.kernels, traced.args, traced.outputs)
        self.first_work = self.first_work or work
        exports: dict[tuple[str, str], shipping.Shipped | str] = {}
        # As a local run checks on a CPU: kernels written for a GPU must lower for CUDA
        # (where a compile target is set, its export checks that).
        unchecked = [p for p in self.places if _emulated_unchecked(self.spec, p)]
        lowering = lowering_error(traced, self.notices) if unchecked else ""
        for place in self.places:
            if lowering and place in unchecked:
                failed(place, "failed to lower", lowering)
                continue
            cached = cached_row(self.stored.get(place.label, {}), key)
            if cached is not None and (self.ref is None or cached.status not in ("ok", "wrong")):
                self.emit(dataclasses.replace(cached, chip=place.label))  # nothing to check
                continue
            shipped = _export(exports, built, place.platform, place.chip, place)
            if isinstance(shipped, str):
                failed(place, "failed to lower", shipped)
                continue
            compile_job = None
            target = _compile_target(self.spec, place)
            if target is not None and cached is None:
                platform, chip = shipping.compile_platform(target)
                program = _export(exports, built, platform, chip, None)
                if isinstance(program, str):
                    failed(place, f"failed to lower ({target})", program)
                    continue
                compile_job = CompileJob(program, target)
            job = TimeJob(
                impl=sweep.PALLAS,
                label=label,
                config=dict(config),
                shipped=shipped,
                chip=place.label,
                settings=self.options.settings,
                work=work,
                peaks=_peaks(place, work.dtype),
                check=self.ref is not None,
                placements=placements,
                cached_row=cached.to_json() if cached is not None else None,
                **self.reference_fields(place, built, digest),
            )
            expected = self.expected.get(digest)
            self.dispatcher.submit(Pipeline(key, place, job, inputs, expected, compile_job))

    def submit_baseline(self, place: connect.Place) -> None:
        """The reference under `jax.jit`, timed on a worker of `place` (or from the cache)."""
        assert self.first is not None
        key = f"{BASELINE_KEY}:{self.reference}" if self.reference and self.options.cache else ""
        cached = cached_row(self.stored.get(place.label, {}), key)
        if cached is not None:
            self.emit(dataclasses.replace(cached, chip=place.label))
            return
        shipped = self.references.get(_platform_key(place.platform, place.chip))
        if shipped is None:
            self.notices.append(
                f"the XLA baseline was not timed on {place.label}: the reference could not "
                "be exported (JAX cannot trace it)"
            )
            return
        _, inputs = self.put_inputs(self.first)
        work = self.first_work or roofline.Work(None, None)
        job = TimeJob(
            impl=sweep.XLA,
            label=BASELINE_LABEL,
            config={},
            shipped=dataclasses.replace(shipped, mode="xla"),
            chip=place.label,
            settings=self.options.settings,
            work=work,
            peaks=_peaks(place, work.dtype),
        )
        self.dispatcher.submit(Pipeline(key, place, job, inputs))

    def first_config(self, built: Built) -> None:
        """What the first config that traced fixes: the reference's digest, the caches."""
        self.first = built
        self.reference = reference_digest(self.ref, built)
        if not self.options.cache:
            return
        shared = Path(self.spec.shared_cache) if self.spec.shared_cache else None
        for place in self.places:
            key_of_run = {**file_key(built, place.measurer()), **(self.options.cache_key or {})}
            store = tune_cache.layered(
                key_of_run, self.options.cache_dir, valid=sweep.is_row_json, shared=shared
            )
            self.stores[place.label] = store
            self.stored[place.label] = {} if self.options.retune else store.load()

    def put_inputs(self, built: Built) -> tuple[str, Any]:
        """The config's array inputs in Ray's store: put once per distinct inputs."""
        identity = tuple(id(a) for a in (*built.args, *built.kwargs.values()))
        if self.last_inputs[0] == identity and self.last_inputs[1] in self.inputs:
            digest = self.last_inputs[1]
            return digest, self.inputs[digest]
        arrays = shipping.array_inputs(built.args, built.kwargs)
        digest = programs.values_digest(arrays)
        self.last_inputs = (identity, digest)
        if digest not in self.inputs:
            self.inputs[digest] = ray.put(arrays)
        return digest, self.inputs[digest]

    def reference_fields(self, place: connect.Place, built: Built, digest: str) -> dict[str, Any]:
        """How the worker gets the reference's outputs: the reference itself, or its values."""
        ref = self.ref
        if ref is None:
            return {}
        key = _platform_key(place.platform, place.chip)
        if callable(ref) and key not in self.references:
            try:
                self.references[key] = shipping.export_call(
                    ref, built.args, built.kwargs, place.platform, place.chip
                )
            except KeyboardInterrupt:
                raise
            except Exception:  # not traceable (NumPy inside): its values are sent instead
                self.references[key] = None
        shipped = self.references.get(key) if callable(ref) else None
        if shipped is not None:
            return {"reference": shipped, "reference_key": f"{self.reference}:{digest}"}
        if digest not in self.expected:
            try:
                values = ref(*built.args, **built.kwargs) if callable(ref) else ref
                values = _host(values)
            except KeyboardInterrupt:
                raise
            except Exception as error:
                values = FailedReference(messages.one_line(error))
            self.expected[digest] = ray.put(values)
        return {}


class FailedReference:
    """A reference that failed here: a worker comparing with it says why."""

    def __init__(self, error: str) -> None:
        """Keeps the reference's error."""
        self.error = error

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        """Refuses to be compared, with the reference's error."""
        raise ValueError(self.error)


def _host(values: Any) -> Any:
    """The reference's values as NumPy arrays (device arrays need not cross)."""
    import jax  # noqa: PLC0415 - the bench layer's JAX, on use

    return jax.device_get(values)


def _context(places: list[connect.Place], chip: str | None, title: str) -> sweep.SweepContext:
    """The plan: one roof only when one chip kind (or `chip=`) gives it."""
    backends = {p.info.backend for p in places}
    roof_chip = chip or (places[0].chip if len(places) == 1 else "")
    try:
        found = roofline.chip_named(roof_chip) if roof_chip else None
    except KeyError:
        found = None
    peak_flops, peak_label = found.peak_flops("float32") if found else (0.0, "")
    plan = live.Plan(
        title=f"{title} ({', '.join(f'{p.label} x{p.slots}' for p in places)})",
        kind="tune",
        total=0,
        x_label="config",
        note=live.CPU_LABEL if "cpu" in backends else "",
        backend=next(iter(backends)) if len(backends) == 1 else "mixed",
        device=" + ".join(dict.fromkeys(p.info.device for p in places)),
        chip=found.name if found else "",
        peak_flops=peak_flops,
        peak_bandwidth=found.bandwidth if found else 0.0,
        peak_label=f"{peak_label} ({found.spec.source})" if found else "",
    )
    return sweep.SweepContext(plan, found)


def _platform_key(platform: str, chip: str) -> tuple[str, str]:
    return platform, chip if platform != "cpu" else ""


def _export(
    exports: dict[tuple[str, str], shipping.Shipped | str],
    built: Built,
    platform: str,
    chip: str,
    place: connect.Place | None,
) -> shipping.Shipped | str:
    """The config exported for a platform (once per config), or why it could not be."""
    key = _platform_key(platform, chip)
    if key not in exports:
        gpu = None
        if place is not None and place.info.capability is not None:
            gpu = (place.info.capability, place.info.device)
        try:
            exports[key] = shipping.export_call(
                built.fn, built.args, built.kwargs, platform, chip, gpu=gpu
            )
        except KeyboardInterrupt:
            raise
        except Exception as error:
            exports[key] = f"exporting for {platform}: {messages.one_line(error)}"
    return exports[key]


def _compile_target(spec: Cluster, place: connect.Place) -> str | None:
    """The target a config is compiled for on CPU workers before `place` times it."""
    if spec.compile is None:
        return None
    if spec.compile != "auto":
        return spec.compile
    if place.info.backend == "gpu" and place.chip in XLA_GPU_CHIPS:
        return f"xla-gpu:{place.chip}"
    if place.info.backend == "tpu" and place.chip:
        return f"tpu-compile:{place.chip}"
    return None


def _emulated_unchecked(spec: Cluster, place: connect.Place) -> bool:
    """Whether `place` emulates on a CPU with no compile that would check the lowering."""
    return place.platform == "cpu" and _compile_target(spec, place) is None


def _peaks(place: connect.Place, dtype: str) -> tuple[float, float]:
    try:
        chip = roofline.chip_named(place.chip) if place.chip else None
    except KeyError:
        chip = None
    if chip is None:
        return 0.0, 0.0
    return chip.peak_flops(dtype)[0], chip.bandwidth
