"""The harness on a real GPU: L2 flush, device-side timing, agreement with do_bench.

Run on a GPU machine with `JAX_PLATFORMS=cuda python -m pytest tests/test_bench_gpu.py -m gpu`
(torch and triton installed for the do_bench comparison). Skipped without a GPU.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest

import pallaslab
from pallaslab._src.bench import harness, live

pytestmark = pytest.mark.gpu


def test_the_harness_flushes_l2_and_times_on_the_device():
    a = jax.random.normal(jax.random.key(0), (2048, 2048), jnp.bfloat16)
    timing = pallaslab.measure(jnp.dot, a, a)
    assert timing.backend == "gpu" and timing.note == ""
    assert timing.l2_flush
    if jax_has_cupti():
        assert timing.method.startswith("device: CUPTI"), timing.notices
        assert timing.wall_samples_ms
        # Kernel time cannot exceed the wall time around the call.
        assert timing.median_ms <= min(timing.wall_samples_ms) * 1.05
    assert 0 < timing.p25_ms <= timing.median_ms <= timing.p75_ms


def jax_has_cupti() -> bool:
    from pallaslab._src.core import jax_adapter

    return jax_adapter.kernel_timer_notice() is None


def test_bench_on_gpu_places_points_on_the_roof():
    from benchmarks.harness import jnp_matmul, seed_matmul

    frame = pallaslab.bench(
        seed_matmul(),
        lambda n: (jax.ShapeDtypeStruct((n, n), jnp.bfloat16),) * 2,
        [1024, 2048],
        ref=jnp_matmul,
        live=False,
    )
    assert set(frame["impl"]) == {"pallas", "xla"}
    assert frame["correct"].dropna().all()
    assert (frame["note"] != live.CPU_LABEL).all()
    if frame.attrs["chip"]:
        assert frame["pct_of_peak"].map(math.isfinite).all()
        assert (frame["pct_of_peak"] < 110).all()


def test_the_harness_agrees_with_triton_do_bench():
    pytest.importorskip("torch")
    pytest.importorskip("triton.testing")
    from benchmarks.harness import AGREEMENT, gpu_rows

    for row in gpu_rows([2048, 4096]):
        wall = row["wall_ms"] / row["do_bench_ms"] - 1
        median = row["median_ms"] / row["do_bench_ms"] - 1
        assert min(abs(wall), abs(median)) <= AGREEMENT, row
        if row["correct"] is not None:
            assert row["correct"], row


def test_an_interpret_label_never_appears_on_gpu_timings():
    x = jnp.ones((1024,), jnp.float32)
    timing, _ = harness.measure_prepared(harness.prepare(jnp.sin, (x,), {}))
    assert timing.note == "" and "interpret" not in timing.method
