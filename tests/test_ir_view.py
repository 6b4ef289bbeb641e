"""The IR tab: lazy, fetched in pieces through widget messages, linked to source."""

from __future__ import annotations

import json

import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.views import highlight
from pallaslab._src.views.inspector import Inspector
from pallaslab._src.views.static_page import static_page
from pallaslab._src.views.tabs import ir
from tests import corpus, frontend
from tests.pages import text_of


@pytest.fixture
def inspection():
    case = corpus.seed_matmul(dtype=jnp.bfloat16)
    return pallaslab.inspect(case.fn, *case.args)


def _widget(inspection, **kwargs):
    widget = Inspector(inspection, **kwargs)
    sent = []
    widget.send = sent.append  # what would go to the browser
    return widget, sent


def _ask(widget, sent, **message):
    """Sends a request as the front end does; returns the one reply it gets."""
    sent.clear()
    widget._on_request(widget, {"tab": "ir", "id": 7, "body": message}, [])
    (envelope,) = sent
    assert envelope["id"] == 7 and envelope["tab"] == "ir"
    json.dumps(envelope)
    return envelope["reply"]


def test_the_ir_tab_is_lazy_and_lowers_nothing_until_asked(inspection):
    widget, _ = _widget(inspection)
    assert "ir" not in widget.panes
    widget.selected = "ir"
    pane = widget.panes["ir"]
    assert [k["name"] for k in pane["kernels"]] == ["_matmul_kernel"]
    assert pane["initial"] == {"kernel": 0, "target": "triton"}
    assert {"ptx:sm_90", "mosaic-tpu:v5e", "tpu-compile:v5e"} <= {
        t["name"] for t in pane["targets"]
    }
    assert inspection.lowerings() == []  # opening lowered nothing


def test_text_arrives_in_pieces_with_its_source_map(inspection):
    widget, sent = _widget(inspection)
    summary = _ask(widget, sent, type="lower", kernel=0, target="triton")
    assert summary["type"] == "lowered" and summary["error"] is None
    assert summary["language"] == "mlir" and "Triton IR" in summary["header"]
    lines, mapped = [], []
    for index in range(summary["chunks"]):
        piece = _ask(widget, sent, type="chunk", kernel=0, target="triton", index=index)
        assert piece["first"] == len(lines) + 1
        lines += piece["lines"]
        mapped += piece["map"]
        assert piece["last"] == (index == summary["chunks"] - 1)
    lowered = inspection.lower("triton")
    assert "\n".join(lines) == lowered.text and len(lines) == summary["lines"]
    files = widget.panes.get("ir") or ir.payload(inspection)
    dot_line = next(n for n, t in enumerate(lines, 1) if "tt.dot" in t)
    (entry,) = [m for m in mapped if m[0] == dot_line]
    source = files["files"][entry[1]]
    assert "pltriton.dot(" in source["lines"][entry[2] - source["first"]]


def test_large_texts_are_cut_into_small_messages():
    text = "\n".join(f"  %{n} = arith.addf %a, %b : vector<8x128xf32>" for n in range(60_000))
    source_map = tuple((n, "/k.py", 3) for n in range(1, 60_001, 7))
    pieces = ir._chunks(text)
    assert len(pieces) > 10 and pieces[0][0] == 0 and pieces[-1][1] == 60_000

    class FakeInspection:
        kernels = ()
        jaxpr_source_map = ()

    sizes = []
    joined = []
    for index in range(len(pieces)):
        piece = ir.chunk(FakeInspection(), text, source_map, index)  # type: ignore[arg-type]
        sizes.append(len(json.dumps(piece)))
        joined += piece["lines"]
    assert joined == text.split("\n")
    assert max(sizes) < 1024 * 1024


def test_a_failing_target_shows_its_error_with_the_line(inspection):
    widget, sent = _widget(inspection)
    summary = _ask(widget, sent, type="lower", kernel=0, target="mosaic-tpu:v5e")
    error = summary["error"]
    assert error["kind"] == "tiling" and error["where"]["label"] == "corpus.py"
    assert summary["chunks"] == 0
    # A bad request answers with a message, and the widget carries on.
    failed = _ask(widget, sent, type="lower", kernel=0, target="ptx:sm_42")
    assert failed["type"] == "failed" and "unknown target" in failed["message"]


@pytest.mark.skipif(__import__("importlib").util.find_spec("triton") is None, reason="needs triton")
def test_resources_panel_and_stages(inspection):
    widget, sent = _widget(inspection)
    summary = _ask(widget, sent, type="lower", kernel=0, target="ptx:sm_90")
    resources = summary["resources"]
    assert resources["kind"] == "gpu"
    facts = dict(resources["facts"])
    assert int(facts["registers per thread"]) > 0 and "KiB" in facts["shared memory per block"]
    assert {o["gpu"] for o in resources["occupancy"]} >= {"A100", "H100", "B200", "RTX 4090"}


def test_static_html_shows_what_was_lowered(inspection):
    page = static_page(inspection)
    assert "Nothing lowered yet" in page
    inspection.lower("triton")
    page = text_of(static_page(inspection))
    assert "tt.dot" in page and "Triton IR" in page


def test_static_html_escapes_kernel_text():
    name = "<script>window.__pwned=1</script>"

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    inspection = pallaslab.inspect(
        pl.pallas_call(kernel, out_shape=corpus.f32(8, 128), name=name), corpus.f32(8, 128)
    )
    inspection.lower("mosaic-tpu:v5e")
    page = static_page(inspection)
    assert "<script>window" not in page and "&lt;script&gt;" in page


def test_the_target_menu_is_grouped_by_family_and_chip():
    from pallaslab._src.records import hardware

    listed = ir._targets()
    groups = [t["group"] for t in listed]
    order = list(dict.fromkeys(groups))
    # Each group's targets together, the program first, then GPU, then TPU.
    assert groups == sorted(groups, key=order.index)
    assert order[0] == "Whole program (StableHLO)"
    assert [g.split(" ")[0] for g in order[1:]] == sorted(
        (g.split(" ")[0] for g in order[1:]), key=lambda f: f != "GPU"
    )
    members = {g: [t["name"] for t in listed if t["group"] == g] for g in order}
    # One group per TPU chip (its Mosaic module and libtpu's compile), one per GPU
    # architecture (the Triton compiler's stages), named with the chips it serves.
    assert members["TPU v5e"] == ["mosaic-tpu:v5e", "tpu-compile:v5e"]
    sm90 = [g for g in order if "sm_90" in g]
    assert len(sm90) == 1 and members[sm90[0]] == [
        "ttgir:sm_90",
        "llir:sm_90",
        "ptx:sm_90",
        "sass:sm_90",
    ]
    hopper = [g.name for g in hardware.GPUS.values() if g.compute_capability == (9, 0)]
    assert all(name in sm90[0] for name in hopper), sm90
    assert members["GPU · XLA's own compile"] == [
        f"xla-gpu:{c}" for c in ("A100", "H100", "H200", "B200")
    ]
    # No group is the flat list it replaces.
    assert len(order) > 10 and max(len(m) for m in members.values()) <= 4


def test_inspector_can_open_on_a_tab(inspection):
    inspection.lower("triton")
    widget, _ = _widget(inspection, selected="ir")
    assert widget.selected == "ir" and "ir" in widget.panes
    assert widget.panes["ir"]["initial"]["target"] == "triton"


def test_front_end_contract():
    code = frontend.source()
    # "Open in new tab": one event name for the widget and the lab extension.
    assert "dispatchOpenText(" in code and "OPEN_TEXT_EVENT" in code
    assert "export const OPEN_TEXT_EVENT = 'pallaslab:open-text';" in (
        frontend.WIDGET.parent / "linemap.ts"
    ).read_text(encoding="utf-8")
    assert "__pallaslabLab === true" in code
    assert "ctx.request(" in code
    for language in ("mlir", "ptx", "sass", "llvm", "llo", "hlo"):
        assert f"'{language}'" in frontend.source("tabs/ir.ts"), language
        assert language in highlight.languages(), language
