"""The live bench view, the check's heatmap in the Run tab, and their static fallbacks."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.bench import live
from pallaslab._src.views import benchplot, heatmap
from pallaslab._src.views.benchview import BenchView, _bench_esm, record_bundle, static_html
from pallaslab._src.views.inspector import Inspector
from pallaslab._src.views.static_page import static_page
from tests import frontend
from tests.pages import pictures

XSS = "<img src=x onerror=alert(1)>"


def plan(**overrides):
    fields = {
        "title": "matmul vs XLA",
        "kind": "sweep",
        "total": 4,
        "x_label": "size",
        "note": live.CPU_LABEL,
        "backend": "cpu",
        "device": "cpu",
    }
    fields.update(overrides)
    return live.Plan(**fields)


def row(impl, n, ms, **extra):
    data = {
        "impl": impl,
        "point": str(n),
        "x": n,
        "size": n,
        "median_ms": ms,
        "p25_ms": ms and ms * 0.9,
        "p75_ms": ms and ms * 1.1,
        "tflops": ms and 2 * n**3 / ms / 1e9,
        "gbps": ms and 12 * n * n / ms / 1e6,
        "flops": 2.0 * n**3,
        "bytes": 12.0 * n * n,
        "pct_of_peak": None,
        "status": "ok",
        "error": "",
    }
    data.update(extra)
    return data


def test_widget_state_follows_the_observer_protocol():
    view = BenchView()
    assert view.progress["state"] == "waiting"
    view.begin(plan())
    assert view.plan["title"] == "matmul vs XLA" and view.progress["total"] == 4
    view.update(row("xla", 256, 1.0), 1)
    assert len(view.rows) == 1 and view.progress["done"] == 1
    assert view.progress["etaS"] is not None and view.progress["current"] == "xla 256"
    view.update(row("pallas", 256, 2.0), 2)
    view.end("interrupted", "kept the 2 measurement(s) made so far")
    assert view.progress["state"] == "interrupted" and view.progress["etaS"] is None
    json.dumps({"plan": view.plan, "rows": view.rows, "progress": view.progress})


def test_throughput_is_shown_first_off_cpu_only():
    gpu = BenchView()
    gpu.begin(plan(backend="gpu", device="NVIDIA H100 80GB HBM3", note="", chip="H100"))
    assert gpu.metric == "tflops"
    cpu = BenchView()
    cpu.begin(plan())
    assert cpu.metric == "time"


def test_static_fallback_has_the_label_a_plot_and_the_numbers():
    view = BenchView()
    view.begin(plan())
    for k, (impl, n, ms) in enumerate([("xla", 256, 1.0), ("pallas", 256, 2.0)], 1):
        view.update(row(impl, n, ms), k)
    view.end("finished", "")
    data, _ = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    page = data["text/html"]
    assert live.CPU_LABEL in page and "data:image/png;base64," in page
    assert "<td>2</td>" in page  # pallas' median
    text = data["text/plain"]
    assert live.CPU_LABEL in text and "finished (2/4)" in text
    assert "faster" not in text and "slower" not in text  # no speedup from CPU timings


def test_speedups_are_stated_off_cpu():
    rows = [row("xla", 1024, 1.08), row("pallas", 1024, 1.0)]
    text = static_html(
        plan(backend="gpu", note="", chip="H100").to_json(),
        rows,
        {"state": "finished", "done": 2, "total": 2},
    )
    assert "Pallas vs XLA at 1024: 1.08x faster" in text


def test_the_png_is_a_png_for_sweeps_tunes_and_rooflines():
    rows = [row("xla", n, n / 100) for n in (128, 256)] + [
        row("pallas", n, n / 90) for n in (128, 256)
    ]
    assert benchplot.png(plan().to_json(), rows).startswith(b"\x89PNG")
    gpu = plan(backend="gpu", chip="H100", peak_flops=989e12, peak_bandwidth=3.35e12).to_json()
    assert benchplot.png(gpu, rows, "tflops").startswith(b"\x89PNG")
    tune_rows = [
        row("pallas", 0, 1.0, point="BLOCK_M=64, BLOCK_N=64", x=None),
        row(
            "pallas",
            0,
            None,
            point="BLOCK_M=64, BLOCK_N=48",
            x=None,
            status="failed to lower",
            error="power of 2",
        ),
        row("xla", 0, 0.5, point="XLA baseline", x=None),
    ]
    assert benchplot.png(plan(kind="tune", x_label="config").to_json(), tune_rows).startswith(
        b"\x89PNG"
    )


def test_user_strings_are_escaped_in_static_bench_html():
    rows = [row("pallas", 1, 1.0, point=XSS, status="failed to build", error=XSS)]
    page = static_html(plan(title=XSS).to_json(), rows, {"state": XSS, "done": 1, "total": 1})
    assert "<img src=x" not in page and "&lt;img src=x" in page


def test_the_bench_view_javascript_never_parses_html():
    code = _bench_esm()
    assert code == frontend.built("bench")
    for sink in frontend.HTML_SINKS:
        assert sink not in code, sink
    assert re.search(r"export\s*\{[^}]*\bas default\b", code)
    for metric in ("time", "tflops", "gbps", "roofline", "table"):
        assert f'"{metric}"' in code


# --- the check's heatmap --------------------------------------------------------


def wrong_last_row():
    def kernel(x_ref, o_ref):
        bump = jnp.where(pl.program_id(0) == pl.num_programs(0) - 1, 1.0, 0.0)
        o_ref[...] = x_ref[...] + bump

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((64, 96), jnp.float32),
        grid=(4, 3),
        in_specs=[pl.BlockSpec((16, 32), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((16, 32), lambda i, j: (i, j)),
        name=XSS,
    )


@pytest.fixture(scope="module")
def located():
    fn = wrong_last_row()
    x = jax.random.normal(jax.random.key(0), (64, 96))
    inspection = pallaslab.inspect(fn, x)
    return inspection.with_result(inspection.run(ref=lambda v: v))


def test_the_run_tab_carries_the_heatmap(located):
    comparison = located.result.comparison
    assert not comparison.ok
    (tile,) = comparison.tiles
    assert tile.bad_tiles == ((3, 0), (3, 1), (3, 2))
    pane = Inspector(located).panes["run"]["result"]["comparison"]
    (data,) = pane["tiles"]
    assert data["counts"] == [[0, 0, 0]] * 3 + [[512, 512, 512]]
    assert data["pattern"] == "the last row of blocks"
    assert data["badPrograms"] == [[3, 0], [3, 1], [3, 2]]
    json.dumps(pane)


def test_a_matching_run_has_no_heatmap():
    fn = pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...]),
        out_shape=jax.ShapeDtypeStruct((64,), jnp.float32),
    )
    inspection = pallaslab.inspect(fn, jnp.ones(64))
    inspection = inspection.with_result(inspection.run(ref=lambda v: v))
    assert inspection.result.comparison.tiles[0].ok
    assert Inspector(inspection).panes["run"]["result"]["comparison"]["tiles"] == []


def test_the_static_run_tab_draws_the_heatmap_escaped(located):
    page = static_page(located)
    assert "the last row of blocks" in page and pictures(page)
    assert "block (3, 2): 512 of 512 elements differ" in "".join(pictures(page))
    assert "<img src=x" not in page


def test_large_tilings_are_coarsened():
    import numpy as np

    from pallaslab._src.records import TileMismatch

    counts = np.zeros((300, 300), np.int64)
    counts[-1, -1] = 5
    tile = TileMismatch("out", (300, 300), (1, 1), counts, np.zeros_like(counts), ((299, 299),))
    data = heatmap.payload(tile)
    rows, cols = len(data["counts"]), len(data["counts"][0])
    assert rows * cols <= heatmap.MAX_CELLS
    assert data["counts"][-1][-1] == 5 and sum(map(sum, data["counts"])) == 5
    assert data["pool"] == [5, 5]


def test_check_results_display_with_their_heatmap():
    fn = wrong_last_row()
    result = pallaslab.check(fn, lambda v: v, jax.ShapeDtypeStruct((64, 96), jnp.float32))
    bundle = result._repr_mimebundle_()
    assert "does not match" in bundle["text/html"] and "<svg" in bundle["text/html"]
    assert bundle["text/plain"].startswith("check of")
    assert "<img src=x" not in bundle["text/html"]
    assert record_bundle(object()) is None


def test_a_tuning_run_counts_its_configs_not_the_xla_baseline():
    from pallaslab._src.views.benchview import summary_text

    tuning = plan(kind="tune", x_label="config", total=5, baseline=1).to_json()
    assert summary_text(tuning, [], {"state": "finished", "done": 5, "total": 5}).startswith(
        "matmul vs XLA: finished (4/4 configs)"
    )
    assert "(2/4 configs)" in static_html(tuning, [], {"state": "running", "done": 2, "total": 5})
    # A sweep counts every measurement, XLA's included.
    assert "(3/4)" in summary_text(
        plan().to_json(), [], {"state": "running", "done": 3, "total": 4}
    )


def test_one_point_is_drawn_as_bars_not_as_an_axis_of_sizes():
    from matplotlib.figure import Figure

    rows = [
        row("pallas", 0, 2.0, point="the cell's inputs", x=None, size=None),
        row("xla", 0, 1.0, point="the cell's inputs", x=None, size=None),
    ]
    ax = Figure().subplots()
    benchplot._metric_axes(ax, plan().to_json(), rows, "time")
    heights = sorted(round(p.get_height(), 3) for p in ax.patches)
    assert heights == [1.0, 2.0]
    assert ax.get_xlabel() == ""
    assert [t.get_text() for t in ax.get_xticklabels()] == ["the cell's inputs"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["pallas", "xla"]


def test_a_cluster_sweep_shows_each_chip_kind_worker_and_retry():
    from pallaslab._src.views.benchview import summary_text

    tuning = plan(kind="tune", x_label="config", total=4).to_json()
    rows = [
        row("pallas", 0, 2.0, point="BLOCK=64", x=None, chip="H100", worker="node a1 · pid 7"),
        row("pallas", 0, 3.0, point="BLOCK=64", x=None, chip="B200", worker="node b2 · pid 9"),
        row(
            "pallas",
            0,
            1.0,
            point="BLOCK=128",
            x=None,
            chip="H100",
            worker="node a1 · pid 7",
            retries=1,
            retry_reason="its node was lost",
        ),
        row("xla", 0, 5.0, point="XLA baseline", x=None, chip="H100", worker="node a1 · pid 7"),
    ]
    view = BenchView()
    view.begin(plan(kind="tune", x_label="config", total=4))
    states = [
        {"worker": "node a1 · pid 7", "chip": "H100", "done": 3, "running": "", "lost": False},
        {"worker": "node c3 · pid 5", "chip": "B200", "done": 0, "running": "", "lost": True},
    ]
    view.workers(states, 2)
    assert view.progress["workers"] == states and view.progress["compiled"] == 2
    progress = {**view.progress, "state": "finished", "done": 4}
    text = summary_text(tuning, rows, progress)
    assert "pallas BLOCK=128 on H100: 1 ms (retried: its node was lost)" in text
    assert "node c3 · pid 5 (B200): 0 done, lost (its configs are tried again elsewhere)" in text
    page = static_html(tuning, rows, progress)
    assert "<th>chip</th><th>worker</th><th>retried</th>" in page
    assert "<td>1x: its node was lost</td>" in page
    assert "<th>chip</th>" not in static_html(tuning, [row("pallas", 0, 1.0)], progress)
    # The static plot: one line per chip kind, the baseline dashed on its chip.
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    benchplot._metric_axes(ax, tuning, rows, "time")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sorted(legend) == ["XLA baseline on H100", "pallas · B200", "pallas · H100"]
