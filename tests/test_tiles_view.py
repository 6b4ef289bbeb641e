"""The Tiles tab's widget state and static fallback, tested in Python (no browser)."""

from __future__ import annotations

import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.views import tilesdata
from pallaslab._src.views.inspector import Inspector
from pallaslab._src.views.static_page import static_page, static_tab
from pallaslab._src.views.tabs import tiles as tiles_tab
from tests import corpus, frontend
from tests.pages import pictures


@pytest.fixture(scope="module")
def kacc():
    case = corpus.kacc_matmul(k=512)
    return pallaslab.inspect(case.fn, *case.args)


@pytest.fixture(scope="module")
def softmax():
    case = corpus.row_softmax(rows=4, cols=100)
    return pallaslab.inspect(case.fn, *case.args)


def big_add(n=16384, b=64):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = jax.ShapeDtypeStruct((n, n), jnp.float32)
    fn = pl.pallas_call(
        kernel,
        out_shape=spec,
        grid=(n // b, n // b),
        in_specs=[
            pl.BlockSpec((b, b), lambda i, j: (i, j)),
            pl.BlockSpec((b, b), lambda i, j: (j, i)),
        ],
        out_specs=pl.BlockSpec((b, b), lambda i, j: (i, j)),
    )
    return pallaslab.inspect(fn, spec, spec)


def test_the_tab_is_lazy_and_built_when_selected(kacc):
    widget = Inspector(kacc)
    ids = [t["id"] for t in widget.tabs]
    assert ids.index("tiles") == ids.index("jaxpr") + 1
    assert "tiles" not in widget.panes
    widget.selected = "tiles"
    pane = widget.panes["tiles"]
    assert "error" not in pane
    json.dumps(pane)
    (kernel,) = pane["kernels"]
    assert kernel["grid"] == [2, 2, 4] and kernel["programs"] == 16 and kernel["table"]
    assert kernel["schedule"] == "tpu"
    assert "Arbitrary axes (kk)" in kernel["order"]["tpu"]
    assert "unspecified" in kernel["order"]["gpu"]


def test_block_positions_decode_to_the_tile_map(kacc):
    kernel = tilesdata.payload(kacc)["kernels"][0]
    tiles = kacc.tiles()
    for op in kernel["operands"][:3]:
        starts = [tilesdata.decode(s).astype(np.int64) for s in op["starts"]]
        extents = [tilesdata.decode(e).astype(np.int64) for e in op["extents"]]
        for program in tiles.programs():
            got = tuple(
                (
                    int(np.broadcast_to(s, tiles.grid)[program]),
                    int(np.broadcast_to(s + e, tiles.grid)[program]),
                )
                for s, e in zip(starts, extents, strict=True)
            )
            assert got == tiles.block(op["index"], program)
    out = kernel["operands"][2]
    # The output block depends on (i, j) only: sent once per (i, j), not per program.
    assert [tilesdata.decode(s).shape for s in out["starts"]] == [(2, 1, 1), (1, 2, 1)]
    assert out["revisitAxes"] == [2]


def test_coverage_decodes_to_the_read_counts(kacc):
    kernel = tilesdata.payload(kacc)["kernels"][0]
    tiles = kacc.tiles()
    for op in kernel["operands"][:3]:
        coverage = op["coverage"]
        edges = [tilesdata.decode(e) for e in coverage["edges"]]
        counts = tilesdata.decode(coverage["counts"])
        full = counts
        for axis, e in enumerate(edges):
            full = np.repeat(full, np.diff(e), axis=axis)
        np.testing.assert_array_equal(full, tiles.read_counts(op["index"]))


def test_figures_of_merit_for_both_schedules_and_all_chips(kacc):
    kernel = tilesdata.payload(kacc)["kernels"][0]
    tpu, gpu = kernel["merit"]["tpu"], kernel["merit"]["gpu"]
    out_tpu = next(o for o in tpu["operands"] if o["label"] == "o_ref")
    out_gpu = next(o for o in gpu["operands"] if o["label"] == "o_ref")
    assert (out_tpu["transfers"], out_gpu["transfers"]) == (4, 16)
    assert {f["chip"] for f in kernel["fits"]["tpu"]} >= {"v5e", "v6e", "v4"}
    assert {f["chip"] for f in kernel["fits"]["gpu"]} >= {"H100", "A100"}
    v5e = next(f for f in kernel["fits"]["tpu"] if f["chip"] == "v5e")
    assert v5e["fits"] and v5e["bound"] == "memory" and v5e["capacityName"] == "VMEM"


def test_a_16384_square_operand_in_64_blocks_stays_under_2_mib():
    payload = tilesdata.payload(big_add())
    size = len(json.dumps(payload))
    assert size < 2 * 1024 * 1024, size
    kernel = payload["kernels"][0]
    assert kernel["programs"] == 65536 and not kernel["table"]
    y = kernel["operands"][1]
    assert tilesdata.decode(y["coverage"]["counts"]).shape == (256, 256)
    assert [tilesdata.decode(s).shape for s in y["starts"]] == [(1, 256), (256, 1)]


def test_requests_return_the_accesses_of_one_program(softmax, monkeypatch):
    widget = Inspector(softmax)
    reply = widget.request(
        {"tab": "tiles", "body": {"kind": "accesses", "kernel": 0, "program": [2]}}
    )
    assert reply["program"] == [2] and reply["complete"]
    x = reply["refs"][0]
    assert x["label"] == "x_ref" and x["summary"]["maskedLanes"] == 28
    assert x["box"] == [128] and x["shape"] == [100]
    masked = tilesdata.decode(x["masked"])
    inside = tilesdata.decode(x["inside"])
    assert masked.shape == (1, 128) and masked[0, 100:].tolist() == [1] * 28
    assert inside[0, :100].all() and not inside[0, 100:].any()
    assert [a["primitive"] for a in reply["accesses"]] == ["masked_load", "masked_swap"]
    assert reply["accesses"][0]["file"] == "corpus.py"
    # Through the widget's message channel, the reply carries the request's id.
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append(content))
    widget._handle_custom_msg(
        {"tab": "tiles", "id": 7, "body": {"kind": "accesses", "kernel": 0, "program": [1]}}, []
    )
    assert sent[0]["id"] == 7 and sent[0]["reply"]["program"] == [1]


def test_bad_requests_get_clear_errors(softmax):
    widget = Inspector(softmax)
    outside = widget.request({"tab": "tiles", "body": {"kind": "accesses", "program": [99]}})
    assert "not in the grid" in outside["error"]
    assert "unknown request" in widget.request({"tab": "tiles", "body": {"kind": "x"}})["error"]
    assert "takes no requests" in widget.request({"tab": "run", "body": {}})["error"]


def test_big_access_maps_are_pooled():
    reply = tiles_tab.respond(big_add(n=1024, b=1024), {"kind": "accesses", "program": [0, 0]})
    x = reply["refs"][0]
    # Three 1024 x 1024 buffers share 2**18 drawn elements: 87,381 each; halving the
    # longer side in turn, 1024 x 1024 becomes 256 x 256 (65,536) after four steps.
    assert x["pool"] == [4, 4]
    assert np.prod(tilesdata.decode(x["reads"]).shape) <= tilesdata.MAX_ACCESS_ELEMENTS // 3


def test_static_fallback_draws_svg_and_escapes_names(kacc):
    html_text = static_tab(kacc, "tiles")
    assert len(pictures(html_text)) == 3 and "<script" not in html_text
    assert all(p.startswith("<svg") for p in pictures(html_text))
    assert "x_ref (in) f32[256,512], block (128, 128): [0:128, 0:128]" in html_text
    assert "reads min / mean / max" in html_text
    page = static_page(kacc)
    assert "<b>Tiles</b>" in page

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    evil = '<img src=x onerror="alert(1)">'
    fn = pl.pallas_call(
        kernel,
        out_shape=corpus.f32(256),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
        name=evil,
    )
    text = static_tab(pallaslab.inspect(fn, corpus.f32(256)), "tiles")
    assert "<img src=x" not in text and "&lt;img" in text


def test_static_fallback_of_a_large_map_stays_small():
    text = static_tab(big_add(), "tiles")
    assert len(text) < 64 * 1024
    assert sum(p.count("<rect") for p in pictures(text)) < 400


def test_the_front_end_has_stable_hooks_for_browser_tests():
    code = frontend.source("tabs/tiles/index.ts", "tabs/tiles/operand.ts")
    assert re.search(r"^  tiles: TILES,$", frontend.source("tabs/index.ts"), re.MULTILINE)
    for hook in (
        "role: 'scrub'",
        "role: 'play'",
        "role: 'accesses'",
        "role: 'schedule'",
    ):
        assert hook in code, hook
    assert "role: 'chip'" in frontend.source("tabs/tiles/figures.ts")
    for attribute in ("dataset.highlighted", "dataset.program", "dataset.block", "dataset.status"):
        assert attribute in code, attribute
    assert re.search(r"ctx\s*\.request\(", code)


def test_kernels_without_blocks_say_so():
    case = corpus.pipelined_add()  # pl.ANY operands: the body moves its own blocks
    inspection = pallaslab.inspect(case.fn, *case.args)
    (kernel,) = tilesdata.payload(inspection)["kernels"]
    assert all(o["access"] == "manual" for o in kernel["operands"])
    assert any("stays in HBM" in n for n in kernel["notices"])
    assert "no blocks to draw" in static_tab(inspection, "tiles")


def test_a_mosaic_gpu_kernel_without_blockspecs_shows_its_copies():
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    @jax.jit
    def f(x):
        return plgpu.kernel(body, out_type=corpus.f32(256), grid=(2,), grid_names=("x",))(x)

    inspection = pallaslab.inspect(f, corpus.f32(256))
    (kernel,) = tilesdata.payload(inspection)["kernels"]
    # Both CTAs load all of x and store all of the output: one copy each, per operand.
    assert [o["access"] for o in kernel["operands"]] == ["pipelined", "pipelined"]
    assert kernel["grid"] == [2, 1]
    assert [c["copies"] for c in kernel["mosaic"]["copies"]] == [2, 2]
    assert kernel["merit"]["gpu"]["bytes"] == 2 * 2 * 256 * 4
    assert "no blocks to draw" not in static_tab(inspection, "tiles")
