"""Long texts: clipped inline, sent whole in chunks on demand, capped in saved notebooks."""

from __future__ import annotations

import html
import json

import pytest

import pallaslab
from pallaslab._src.views import texts
from pallaslab._src.views.inspector import Inspector
from pallaslab._src.views.static_page import static_page, static_tab
from tests import corpus


@pytest.fixture(scope="module")
def inspection():
    case = corpus.seed_matmul()
    return pallaslab.inspect(case.fn, *case.args)


def test_clip_keeps_the_map_of_the_shown_lines():
    text = "\n".join(f"line {k}" for k in range(1, 11))
    shown, source_map, total = texts.clip(text, [[1, 0, 5], [4, 0, 6], [9, 1, 2]], max_lines=4)
    assert shown.splitlines() == ["line 1", "line 2", "line 3", "line 4"]
    assert source_map == [[1, 0, 5], [4, 0, 6]]
    assert total == 10
    assert texts.clip("a\nb", [[2, 0, 1]], max_lines=4) == ("a\nb", [[2, 0, 1]], 2)


def test_chunks_reassemble():
    text = "x" * 2500 + "y"
    pieces = texts.chunks(text, 1000)
    assert [len(p) for p in pieces] == [1000, 1000, 501]
    assert "".join(pieces) == text
    assert texts.chunks("", 10) == [""]


def fetch(widget, tab, key):
    """Fetches a whole text as the front end does: the header, then each piece."""
    header = widget.request({"tab": tab, "body": {"textKey": key, "chunk": -1}})
    if "error" in header:
        return header, []
    pieces = [
        widget.request({"tab": tab, "body": {"textKey": key, "chunk": index}})
        for index in range(header["chunks"])
    ]
    return header, pieces


def test_long_jaxprs_are_clipped_inline_and_sent_whole_on_demand(inspection, monkeypatch):
    monkeypatch.setattr(texts, "INLINE_LINES", 5)
    monkeypatch.setattr(texts, "CHUNK_CHARS", 64)
    widget = Inspector(inspection)
    view = widget.panes["jaxpr"]["views"][0]
    whole = inspection.kernels[0].jaxpr
    assert view["lines"] == len(whole.split("\n")) > 5
    assert view["text"].split("\n") == whole.split("\n")[:5]
    assert all(entry[0] <= 5 for entry in view["map"])

    header, pieces = fetch(widget, "jaxpr", view["id"])
    assert header["language"] == "jaxpr" and "kernel _matmul_kernel" in header["title"]
    assert header["chunks"] == len(pieces) > 1
    assert all(len(p["text"]) <= 64 for p in pieces)
    assert [p["index"] for p in pieces] == list(range(len(pieces)))
    assert "".join(p["text"] for p in pieces) == whole
    json.dumps([header, *pieces])
    # The whole map, pointing past the clipped lines too, into the same sources.
    assert max(entry[0] for entry in header["sourceMap"]) > 5
    assert [s["label"] for s in header["sources"]] == [
        f["label"] for f in widget.panes["jaxpr"]["files"]
    ]


def test_bad_text_requests_get_an_error_reply(inspection):
    widget = Inspector(inspection)
    assert "error" in fetch(widget, "jaxpr", "nope")[0]
    assert "no tab 'run' with long texts" in fetch(widget, "run", "x")[0]["error"]
    view = widget.panes["jaxpr"]["views"][0]
    beyond = widget.request({"tab": "jaxpr", "body": {"textKey": view["id"], "chunk": 99}})
    assert "IndexError" in beyond["error"]


def test_requests_arrive_through_the_widgets_message_route(inspection, monkeypatch):
    widget = Inspector(inspection)
    sent = []
    monkeypatch.setattr(widget, "send", lambda content, buffers=None: sent.append(content))
    view = widget.panes["jaxpr"]["views"][0]
    widget._handle_custom_msg({"tab": "jaxpr", "id": 3, "body": {"textKey": view["id"]}}, [])
    widget._handle_custom_msg("not a dict", [])
    (reply,) = sent
    assert reply["id"] == 3 and reply["reply"]["chunks"] >= 1


def test_saved_notebooks_get_no_giant_tabs(inspection, monkeypatch):
    assert texts.clip_html("<p>x</p>", "Jaxpr", limit=100) == "<p>x</p>"
    note = texts.clip_html("x" * 200, "<b>Jaxpr</b>", limit=100)
    assert "too large" in note and html.escape("<b>Jaxpr</b>") in note
    monkeypatch.setattr(texts, "STATIC_TAB_CHARS", 300)
    page = static_page(inspection)
    assert "The Jaxpr tab is too large for a saved notebook" in page


def test_static_jaxpr_is_clipped(inspection, monkeypatch):
    monkeypatch.setattr(texts, "INLINE_LINES", 3)

    body = static_tab(inspection, "jaxpr")
    assert "more lines." in body
