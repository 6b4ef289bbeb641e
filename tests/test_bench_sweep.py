"""Timing harness, sweeps into DataFrames, rooflines, autotuning and its cache."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.bench import harness, live, roofline, sweep, tune
from pallaslab._src.bench.cache import TuneCache
from pallaslab._src.views.benchview import BenchView
from tests import corpus

FAST = harness.TimerSettings(warmup=1, warmup_s=0.0, min_reps=5, max_reps=15, budget_s=0.3)


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def square_args(n):
    return (f32(n, n), f32(n, n))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PALLASLAB_CACHE_DIR", str(tmp_path / "cache"))


# --- harness -----------------------------------------------------------------


def test_measure_separates_compile_and_reports_quartiles():
    case = corpus.seed_matmul(128, 128, 64)
    a, b = (jnp.ones(s.shape, s.dtype) for s in case.args)
    timing = pallaslab.measure(case.fn, a, b, settings=FAST)
    assert timing.mode == "emulated" and timing.backend == "cpu"
    assert timing.note == live.CPU_LABEL
    assert FAST.min_reps <= timing.reps <= FAST.max_reps
    assert 0 < timing.min_ms <= timing.p25_ms <= timing.median_ms <= timing.p75_ms
    # Compiling (with tracing and lowering) is reported, and not among the samples.
    assert timing.compile_ms > 10 * timing.median_ms
    assert max(timing.samples_ms) < timing.compile_ms
    assert timing.warmup >= FAST.warmup
    assert not timing.l2_flush  # no L2 flush on CPU
    assert "not representative" in str(timing)


def test_measure_times_plain_xla_too():
    x = jnp.ones((256, 256))
    timing = pallaslab.measure(jnp.dot, x, x, settings=FAST)
    assert timing.mode == "xla" and timing.median_ms > 0


def test_the_harness_stops_once_the_median_is_stable():
    x = jnp.ones((64,))
    settings = harness.TimerSettings(
        warmup=2, warmup_s=0.0, min_reps=5, max_reps=10_000, budget_s=30, precision=0.2
    )
    timing = pallaslab.measure(lambda v: v + 1, x, settings=settings)
    assert timing.reps < 10_000
    assert timing.median_error <= 0.2


def test_the_harness_respects_its_budget_and_says_so():
    calls = []

    def slow(v):
        calls.append(1)  # traced once
        return jnp.sin(v)

    settings = harness.TimerSettings(
        warmup=1, warmup_s=0.0, min_reps=3, max_reps=10_000, budget_s=0.05, precision=0.0
    )
    timing = pallaslab.measure(slow, jnp.ones((16,)), settings=settings)
    assert any("budget" in n for n in timing.notices)
    assert len(calls) == 1


def test_median_error_from_the_iqr():
    assert harness.median_error([1.0]) == math.inf
    tight = harness.median_error([1.0, 1.0, 1.001, 0.999] * 25)
    wide = harness.median_error([1.0, 2.0, 0.5, 1.5] * 25)
    assert tight < 0.01 < wide


def test_shape_only_arguments_are_refused_by_the_harness():
    with pytest.raises(TypeError, match="concrete"):
        harness.prepare(jnp.sin, (f32(4),), {})


# --- sweeps ------------------------------------------------------------------


def test_bench_returns_both_impls_with_sane_numbers():
    case = corpus.seed_matmul()
    frame = pallaslab.bench(
        case.fn, square_args, [64, 128], ref=lambda a, b: a @ b, settings=FAST, live=False
    )
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns[:8]) == list(sweep.MAIN_COLUMNS)
    assert len(frame) == 4
    assert sorted(frame["impl"]) == ["pallas", "pallas", "xla", "xla"]
    assert list(frame["size"]) == [64, 64, 128, 128]
    assert (frame["median_ms"] > 0).all()
    assert (frame["p25_ms"] <= frame["median_ms"]).all()
    assert (frame["median_ms"] <= frame["p75_ms"]).all()
    # FLOPs counted from the kernel body: 2*n^3 for the dots, plus the adds.
    pallas = frame[frame["impl"] == "pallas"].set_index("size")
    assert pallas.loc[128, "flops"] >= 2 * 128**3
    assert pallas.loc[128, "bytes"] == 3 * 128 * 128 * 4
    seconds = pallas["median_ms"] / 1e3
    np.testing.assert_allclose(pallas["tflops"], pallas["flops"] / seconds / 1e12)
    np.testing.assert_allclose(pallas["gbps"], pallas["bytes"] / seconds / 1e9)
    assert pallas["correct"].all()
    # On CPU: every timing labelled, no % of peak, no speedup claimed.
    assert (frame["note"] == live.CPU_LABEL).all()
    assert frame["pct_of_peak"].isna().all()
    assert frame.attrs["note"] == live.CPU_LABEL
    assert (frame["compile_ms"] > 0).all()
    assert list(frame[frame["impl"] == "pallas"]["mode"]) == ["emulated"] * 2
    assert not any("speedup" in c for c in frame.columns)


def test_bench_flags_a_kernel_that_differs_from_its_reference():
    case = corpus.blocked_add()
    frame = pallaslab.bench(
        case.fn,
        lambda n: (f32(1024), f32(1024)),
        [1024],
        ref=lambda x, y: x - y,
        settings=FAST,
        live=False,
    )
    pallas = frame[frame["impl"] == "pallas"].iloc[0]
    # Checked (not None) and wrong; pandas may hand back numpy's bool, so not `is False`.
    assert pallas["correct"] is not None and not pallas["correct"]
    assert pallas["status"] == "wrong" and "differ" in pallas["error"]


def test_user_flops_and_a_chosen_chip():
    case = corpus.blocked_add()
    frame = pallaslab.bench(
        case.fn,
        lambda n: (f32(1024), f32(1024)),
        [1024],
        flops=lambda n: 1024.0,
        bytes_accessed=3 * 4096,
        chip="H100",
        settings=FAST,
        live=False,
    )
    assert frame["flops"].tolist() == [1024.0]
    assert frame["bytes"].tolist() == [3 * 4096.0]
    assert frame.attrs["chip"] == "H100"
    assert frame.attrs["peak_bandwidth"] == 3.35e12  # H100 SXM: "3.35TB/s"
    assert frame["pct_of_peak"].isna().all()  # CPU timings are never placed on a GPU roof


def test_interrupting_a_sweep_keeps_the_points_so_far():
    case = corpus.blocked_add()
    ended = []

    class Recorder(live.NullObserver):
        def end(self, state, message):
            ended.append((state, message))

    calls = {"n": 0}
    real = harness.measure_prepared

    def measure_then_stop(prepared, settings=None):
        # The stop button, while the third measurement (xla at size 2) runs.
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(prepared, settings)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "measure_prepared", measure_then_stop)
        frame = pallaslab.bench(
            case.fn,
            lambda n: (f32(1024), f32(1024)),
            [1, 2, 3],
            ref=lambda x, y: x + y,
            settings=FAST,
            live=Recorder(),
        )
    assert len(frame) == 2  # xla and pallas at size 1, kept
    assert list(frame["impl"]) == ["xla", "pallas"] and (frame["median_ms"] > 0).all()
    assert frame.attrs["interrupted"] is True
    assert ended == [("interrupted", "kept the 2 measurement(s) made so far")]


def test_the_live_view_grows_with_each_point():
    case = corpus.blocked_add()
    view = BenchView()
    seen = []
    view.observe(lambda change: seen.append(len(change["new"])), names="rows")
    progress = []
    view.observe(lambda change: progress.append(change["new"].get("done")), names="progress")
    frame = pallaslab.bench(
        case.fn,
        lambda n: (f32(1024), f32(1024)),
        [1, 2],
        ref=lambda x, y: x + y,
        settings=FAST,
        live=view,
    )
    assert seen[-4:] == [1, 2, 3, 4]  # one point at a time, as each finished
    assert progress[-1] == 4 and view.progress["total"] == 4
    assert view.progress["state"] == "finished"
    assert view.plan["note"] == live.CPU_LABEL and view.plan["kind"] == "sweep"
    assert [r["impl"] for r in view.rows] == ["xla", "pallas"] * 2
    assert view.rows[1]["median_ms"] == pytest.approx(frame.iloc[1]["median_ms"])
    assert view.metric == "time"  # on CPU, time (not throughput) is shown first


def test_text_progress_on_a_terminal(capsys):
    import io

    stream = io.StringIO()
    progress = live.TextProgress(stream)
    pallaslab.bench(
        corpus.blocked_add().fn,
        lambda n: (f32(1024), f32(1024)),
        [1],
        settings=FAST,
        live=progress,
    )
    text = stream.getvalue()
    assert live.CPU_LABEL in text and "1/1" in text and "finished" in text


# --- roofline ----------------------------------------------------------------


def test_chips_are_detected_from_device_kinds():
    assert roofline.detect_chip("NVIDIA H100 80GB HBM3").name == "H100"
    assert roofline.detect_chip("NVIDIA H200").name == "H200"
    assert roofline.detect_chip("NVIDIA GeForce RTX 4090").name == "RTX 4090"
    assert roofline.detect_chip("TPU v5 lite").name == "v5e"
    assert roofline.detect_chip("TPU v6 lite").name == "v6e"
    assert roofline.detect_chip("TPU v4").name == "v4"
    assert roofline.detect_chip("cpu") is None
    with pytest.raises(KeyError, match="known"):
        roofline.chip_named("Z80")


def test_peaks_depend_on_the_dtype():
    # The Hopper whitepaper's H100 SXM5 peaks: 989.4 dense BF16 (and FP16) tensor-core
    # TFLOP/s, 66.9 FP32; a TPU has one roof, the MXU's bf16 (v5e: 197 TFLOP/s).
    h100 = roofline.chip_named("H100")
    assert h100.peak_flops("bfloat16") == (989.4e12, "H100 BF16 dense tensor-core peak")
    assert h100.peak_flops("float16")[0] == 989.4e12
    assert h100.peak_flops("float32") == (66.9e12, "H100 FP32 (non-tensor-core) peak")
    assert roofline.chip_named("v5e").peak_flops("float32") == (197e12, "TPU v5e BF16 peak")
    assert roofline.chip_named("A100").bandwidth == 2.039e12


def test_pct_of_peak_is_the_share_of_the_roof_at_that_intensity():
    # 500 TFLOP in 1 s on a 1000 TFLOP/s chip: half the compute roof.
    work = roofline.Work(flops=5e14, bytes=1e9)
    assert roofline.pct_of_peak(work, 1.0, 1e15, 1e12) == pytest.approx(50.0)
    memory_bound = roofline.Work(flops=1e9, bytes=1e9)
    # 1 GB in 1 s of a 1 TB/s chip: 0.1% of the memory roof.
    assert roofline.pct_of_peak(memory_bound, 1.0, 1e15, 1e12) == pytest.approx(0.1)
    assert roofline.attainable(1.0, 1e15, 1e12) == 1e12
    assert math.isnan(roofline.pct_of_peak(roofline.Work(None, None), 1.0, 1e15, 1e12))


def test_work_prefers_the_declared_cost_estimate():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
        cost_estimate=pl.CostEstimate(flops=1234, transcendentals=0, bytes_accessed=999),
    )
    inspection = pallaslab.inspect(fn, f32(256))
    work = roofline.program_work(inspection.kernels, inspection.args, inspection.outputs)
    assert (work.flops, work.bytes) == (1234, 999)
    assert "CostEstimate" in work.flops_source
    counted = pallaslab.inspect(corpus.blocked_add().fn, f32(1024), f32(1024))
    work = roofline.program_work(counted.kernels, counted.args, counted.outputs)
    assert work.flops == 1024 and "counted" in work.flops_source
    assert work.bytes == 3 * 4096 and "compulsory" in work.bytes_source
    by_xla = roofline.program_work(
        (),
        counted.args,
        counted.outputs,
        xla_cost=lambda: roofline.xla_cost_analysis(lambda x, y: x @ y, [jnp.ones((8, 8))] * 2),
    )
    assert by_xla.flops == 2 * 8**3 and "XLA" in by_xla.flops_source


# --- autotuning -----------------------------------------------------------------


def build_matmul(BLOCK_M, BLOCK_N, BLOCK_K=32):  # noqa: N803 - the names being tuned
    return corpus.make_seed_matmul(BLOCK_M, BLOCK_N, BLOCK_K)


SPACE = {"BLOCK_M": [32, 64], "BLOCK_N": [64, 48]}


def test_autotune_four_configs_of_the_seed_matmul():
    view = BenchView()
    result = pallaslab.tune(
        build_matmul,
        SPACE,
        f32(128, 128),
        f32(128, 128),
        ref=lambda a, b: a @ b,
        settings=FAST,
        live=view,
    )
    assert result.state == "finished"
    pallas = [r for r in result.rows if r.impl == "pallas"]
    assert [r.config for r in pallas] == tune.configs_of(SPACE)
    # A config Triton cannot lower (48 is no power of 2) is recorded with its error.
    failed = {tuple(r.config.values()): r for r in result.failed}
    assert set(failed) == {(32, 48), (64, 48)}
    for row in failed.values():
        assert row.status == "failed to lower"
        assert "power of 2" in row.error and "cuda" in row.error
    ok = [r for r in pallas if r.status == "ok"]
    assert [r.config for r in ok] == [
        {"BLOCK_M": 32, "BLOCK_N": 64},
        {"BLOCK_M": 64, "BLOCK_N": 64},
    ]
    # The best is the faster of the two configs that run (which one, the timings decide).
    assert result.best == min(ok, key=lambda r: r.median_ms).config
    best = result.best_row
    assert best.correct is True and best.median_ms == min(r.median_ms for r in ok)
    # The XLA baseline, and the table with config columns first.
    assert result.rows[-1].impl == "xla" and result.rows[-1].median_ms > 0
    table = result.table
    assert list(table.columns[:3]) == ["impl", "BLOCK_M", "BLOCK_N"]
    assert len(table) == 5
    assert (table[table["status"] == "ok"]["note"] == live.CPU_LABEL).all()
    # The live view saw every config.
    assert len(view.rows) == 5 and view.progress["state"] == "finished"
    assert view.plan["kind"] == "tune"
    assert "best: BLOCK_M=" in result.summary()


def test_autotune_results_are_cached_on_disk(monkeypatch, tmp_path):
    args = (f32(64, 64), f32(64, 64))
    first = pallaslab.tune(
        build_matmul, SPACE, *args, ref=lambda a, b: a @ b, settings=FAST, live=False
    )
    assert first.cache_path.startswith(str(tmp_path))
    assert not any(r.cached for r in first.rows)

    measured = []
    real = harness.measure_prepared

    def counting(prepared, settings=None):
        measured.append(1)
        return real(prepared, settings)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "measure_prepared", counting)
        again = pallaslab.tune(
            build_matmul, SPACE, *args, ref=lambda a, b: a @ b, settings=FAST, live=False
        )
    assert measured == []  # nothing measured again
    assert all(r.cached for r in again.rows)
    assert again.best == first.best
    assert [r.median_ms for r in again.rows if r.status == "ok"] == [
        r.median_ms for r in first.rows if r.status == "ok"
    ]
    assert [r.error for r in again.failed] == [r.error for r in first.failed]
    # A new value measures only the new configs; other shapes are another entry.
    wider = {"BLOCK_M": [32, 64], "BLOCK_N": [64, 48, 32]}
    grown = pallaslab.tune(
        build_matmul, wider, *args, ref=lambda a, b: a @ b, settings=FAST, live=False
    )
    fresh = [r.config for r in grown.rows if not r.cached and r.impl == "pallas"]
    assert fresh == [{"BLOCK_M": 32, "BLOCK_N": 32}, {"BLOCK_M": 64, "BLOCK_N": 32}]
    other = pallaslab.tune(
        build_matmul,
        {"BLOCK_M": [32], "BLOCK_N": [32]},
        f32(128, 64),
        f32(64, 64),
        ref=lambda a, b: a @ b,
        settings=FAST,
        live=False,
    )
    assert other.cache_path != first.cache_path
    # retune=True measures again.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "measure_prepared", counting)
        retuned = pallaslab.tune(
            build_matmul,
            SPACE,
            *args,
            ref=lambda a, b: a @ b,
            settings=FAST,
            live=False,
            retune=True,
        )
    assert len(measured) == 3  # two configs that lower, and the baseline
    assert not any(r.cached for r in retuned.rows)


def test_a_damaged_cache_file_is_ignored(tmp_path):
    cache = TuneCache({"k": 1}, tmp_path)
    cache.path.parent.mkdir(parents=True)
    cache.path.write_text("{not json")
    assert cache.load() == {}
    cache.store({"a": {"impl": "pallas"}})
    assert cache.load() == {"a": {"impl": "pallas"}}
    assert TuneCache({"k": 2}, tmp_path).load() == {}


def test_wrong_configs_are_not_the_best():
    def build(SCALE):  # noqa: N803
        return lambda x: x * SCALE

    result = pallaslab.tune(
        build,
        {"SCALE": [1.0, 2.0]},
        f32(256),
        ref=lambda x: x * 2.0,
        settings=FAST,
        live=False,
        cache=False,
    )
    assert result.best == {"SCALE": 2.0}
    assert [r.status for r in result.rows if r.impl == "pallas"] == ["wrong", "ok"]
    assert result.cache_path == ""


def test_tune_names_must_be_parameters_of_build():
    with pytest.raises(ValueError, match="does not take BLOCK_Q"):
        pallaslab.tune(build_matmul, {"BLOCK_Q": [1]}, f32(64, 64), f32(64, 64))


def test_parse_space():
    assert tune.parse_space(["BLOCK_M=64,128", "num_warps=4,8", "act='gelu',relu"]) == {
        "BLOCK_M": [64, 128],
        "num_warps": [4, 8],
        "act": ["gelu", "relu"],
    }
    for bad in ("BLOCK_M", "=4", "BLOCK_M=", "1x=2"):
        with pytest.raises(ValueError, match="NAME=V1,V2"):
            tune.parse_space([bad])
    with pytest.raises(ValueError, match="twice"):
        tune.parse_space(["A=1", "A=2"])
    # An empty value is a typo, refused by name, never dropped.
    for bad, where in [
        ("BM=32,,64", "between 32 and 64"),
        ("BM=,32", "before 32"),
        ("BM=32,", "after 32"),
        ("BM=32,,", "between 32 and ..."),
    ]:
        with pytest.raises(ValueError, match=rf"--tune {bad}: the value {where} is empty"):
            tune.parse_space([bad])
    assert len(tune.configs_of({"A": [1, 2], "B": [3, 4, 5]})) == 6


def test_l2_flush_and_device_timer_paths_run_anywhere(monkeypatch):
    # Asked for explicitly, the GPU-only steps run on CPU too (the flush is real; the
    # device timer falls back to the wall clock, saying why).
    settings = harness.TimerSettings(
        warmup=1,
        warmup_s=0.0,
        min_reps=3,
        max_reps=5,
        budget_s=0.2,
        l2_flush=True,
        device_timer=True,
        flush_bytes=1 << 20,
    )
    timing = pallaslab.measure(jnp.sin, jnp.ones((64,)), settings=settings)
    assert timing.l2_flush and "L2 flushed" in timing.method
    if jax.default_backend() == "cpu":
        assert timing.method.startswith("wall clock")
        assert any("CUPTI" in n for n in timing.notices)


def test_device_samples_split_kernels_by_repetition(monkeypatch):
    import contextlib

    from pallaslab._src.core import jax_adapter

    log: list[tuple[str, float]] = []

    @contextlib.contextmanager
    def fake_kernel_times():
        start = len(log)
        found: list[tuple[str, float]] = []
        yield found
        found.extend(log[start:])

    monkeypatch.setattr(jax_adapter, "kernel_timer_notice", lambda: None)
    monkeypatch.setattr(jax_adapter, "kernel_times", fake_kernel_times)

    def run():
        log.extend([("gemm", 1.0), ("epilogue", 0.25)])
        return jnp.zeros(())

    class Flush:
        def __call__(self):
            log.append(("flush", 9.0))

    samples = harness._device_samples(run, Flush(), 4, [])
    assert samples == [1.25] * 4
    notices: list[str] = []
    assert harness._device_samples(lambda: jnp.zeros(()), Flush(), 4, notices) is None
    assert "saw" in notices[0]


def test_a_stop_while_inputs_are_made_keeps_the_points_so_far():
    def make_args(n):
        if n == 3:
            raise KeyboardInterrupt
        return (f32(1024), f32(1024))

    frame = pallaslab.bench(
        corpus.blocked_add().fn,
        make_args,
        [1, 2, 3, 4],
        ref=lambda x, y: x + y,
        settings=FAST,
        live=False,
    )
    assert list(frame["size"]) == [1, 1, 2, 2]
    assert frame.attrs["state"] == "interrupted"
