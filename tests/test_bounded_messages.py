"""No widget message (state or comm message) over 2 MiB, whatever the kernel.

Every message the inspector sends goes through a recording comm and is measured as
the kernel sends it: UTF-8 JSON. The cases are the issue's: a 1-D grid of 10**7
programs (its Tiles pane was 108.8 MB), and a cell with a 4 MB line (its Source,
Jaxpr and IR panes each carried it: about 28 MB after three clicks).
"""

from __future__ import annotations

import json

import comm
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.utils.capture import capture_output
from ipywidgets.widgets import widget as widget_module
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.views import inspector as inspector_module
from pallaslab._src.views import tilesdata
from pallaslab._src.views.inspector import Inspector
from tests.test_magic import ADD_CELL

LIMIT = 2 * 1024 * 1024


def size_of(data) -> int:
    """Bytes of a message's JSON, as jupyter_client packs it (UTF-8, no ASCII escapes)."""
    return len(json.dumps(data, ensure_ascii=False).encode("utf-8"))


@pytest.fixture
def sent(monkeypatch):
    """Every message widgets send: (message type, data), in order."""
    records: list[tuple[str, dict]] = []

    class RecordingComm(comm.DummyComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            records.append((msg_type, data or {}))

    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    return records


def request(widget, tab, body, ident=1):
    """A tab's request, as the front end sends it (the reply goes out as a message)."""
    widget._on_request(widget, {"tab": tab, "id": ident, "body": body}, [])


def copy_call(programs, block=8):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = jax.ShapeDtypeStruct((programs * block,), jnp.float32)
    return pl.pallas_call(
        kernel,
        out_shape=spec,
        grid=(programs,),
        in_specs=[pl.BlockSpec((block,), lambda i: (i,))],
        out_specs=pl.BlockSpec((block,), lambda i: (i,)),
    ), spec


def test_ten_million_programs(sent):
    fn, spec = copy_call(10**7)
    inspection = pallaslab.inspect(fn, spec)
    widget = Inspector(inspection)
    display = widget._repr_mimebundle_()[0]
    for tab in [t["id"] for t in widget.tabs]:
        widget.selected = tab
    widget.send_state()  # what a page that asks for the whole state gets
    request(widget, "tiles", {"kind": "accesses", "kernel": 0, "program": [9_999_999]})
    request(widget, "jaxpr", {"textKey": "kernel0", "chunk": -1})
    request(widget, "jaxpr", {"textKey": "kernel0", "chunk": 0})

    sizes = [size_of(data) for _, data in sent]
    assert sent[0][0] == "comm_open" and len(sent) >= 8
    assert max(sizes) < LIMIT, sorted(sizes)[-3:]
    assert size_of(display) < LIMIT
    # No static picture of ten million blocks at display time (it took seconds).
    assert "the Tiles tab draws them when opened" in display["text/html"]

    # The Tiles pane was built (not replaced by an error), sampled: every stride-th
    # program's block, which starts at program * 8 (hand-computed: block 8, blocked).
    kernel = widget.panes["tiles"]["kernels"][0]
    (stride,) = kernel["stride"]
    assert kernel["programs"] == 10**7 and stride > 1
    assert kernel["shown"] == [-(-(10**7) // stride)]
    starts = tilesdata.decode(kernel["operands"][0]["starts"][0])
    assert np.array_equal(starts, np.arange(0, 10**7, stride) * 8)
    # Every element is read by exactly one program, whatever was merged for drawing.
    coverage = kernel["operands"][0]["coverage"]
    assert coverage["min"] == coverage["max"] == 1
    # The program asked about is answered (its accesses, not an error).
    reply = sent[-3][1]["content"]["reply"]
    assert reply["program"] == [9_999_999] and "error" not in reply


def test_a_cell_with_a_four_megabyte_line(ip, sent):
    line = "LONG = '" + "x" * (4 << 20) + "'"
    with capture_output() as captured:
        result = ip.run_cell(f"%%kernel add(x, y)\n{ADD_CELL}{line}\n")
    assert result.success, result.error_in_exec
    view = next(
        o.data["application/vnd.jupyter.widget-view+json"]
        for o in captured.outputs
        if "application/vnd.jupyter.widget-view+json" in o.data
    )
    widget = widget_module._instances[view["model_id"]]
    assert isinstance(widget, Inspector)
    for tab in ("source", "jaxpr", "ir", "tiles", "run"):  # the three clicks, and more
        widget.selected = tab
    widget.send_state()
    request(widget, "jaxpr", {"textKey": "kernel0", "chunk": -1})

    sizes = [size_of(data) for _, data in sent]
    assert max(sizes) < LIMIT, sorted(sizes)[-3:]
    assert sum(sizes) < 3 * LIMIT  # nothing sent over and over
    bundles = [o.data for o in captured.outputs]
    assert all(size_of(b) < LIMIT for b in bundles)
    # The long line (the cell's last) is shown cut, saying by how much: 1000
    # characters kept of len(line) (hand-computed count in the marker).
    source = widget.panes["source"]["files"][0]
    assert source["first"] == 1
    shown = source["lines"][-1]
    assert shown == f"{line[:1000]} … ({len(line) - 1000:,} more characters)"


def test_each_pane_is_sent_once(sent, monkeypatch):
    fn, spec = copy_call(8, 128)
    widget = Inspector(pallaslab.inspect(fn, spec))
    for tab in ("tiles", "ir", "overview", "tiles", "ir", "run"):
        widget.selected = tab
    carried: dict[str, int] = {}
    for _, data in sent:
        state = data.get("state", {})
        for key, value in state.items():
            if key.startswith("pane_") and value is not None:
                carried[key] = carried.get(key, 0) + 1
    assert carried == {f"pane_{t['id']}": 1 for t in widget.tabs}


def test_the_built_panes_stay_within_the_state_budget(sent, monkeypatch):
    fn, spec = copy_call(8, 128)
    inspection = pallaslab.inspect(fn, spec)
    sizes = {
        t: inspector_module.json_size(Inspector(inspection).panes.get(t)) for t in ("overview",)
    }
    budget = sizes["overview"] + 2000  # room for the overview and a small pane
    monkeypatch.setattr(inspector_module, "MAX_STATE_BYTES", budget)
    widget = Inspector(inspection)
    widget.selected = "tiles"  # larger than the room left: the others are dropped
    assert widget.panes.keys() == {"tiles"}
    assert widget.pane_overview is None
    widget.selected = "overview"  # rebuilt when shown again
    assert "kernels" in widget.panes["overview"]
    # Tiles and the overview together are over the room: the older, tiles, is dropped.
    assert widget.panes.keys() == {"overview"} and widget.pane_tiles is None
    assert sum(widget._sizes.values()) == sizes["overview"] <= budget


def test_a_pane_over_the_limit_says_so(monkeypatch):
    monkeypatch.setattr(inspector_module, "MAX_PANE_BYTES", 100)
    fn, spec = copy_call(8, 128)
    widget = Inspector(pallaslab.inspect(fn, spec))
    assert "too large to show here" in widget.panes["overview"]["error"]


def test_a_reply_over_the_limit_is_an_error(sent, monkeypatch):
    fn, spec = copy_call(8, 128)
    widget = Inspector(pallaslab.inspect(fn, spec))
    monkeypatch.setattr(widget, "request", lambda content: {"text": "y" * (3 << 20)})
    request(widget, "jaxpr", {"textKey": "kernel0", "chunk": 0})
    reply = sent[-1][1]["content"]["reply"]
    assert "too large to send" in reply["error"]
    assert size_of(sent[-1][1]) < 4096


def test_whole_texts_come_in_pieces_under_the_limit_whatever_they_hold():
    # Control characters are escaped as \\u0001: 6 bytes each, the worst case.
    from pallaslab._src.views import texts

    text = "\x01" * (3 * texts.CHUNK_CHARS)
    pieces = texts.chunks(text)
    assert len(pieces) == 3
    assert all(size_of({"text": p}) < LIMIT for p in pieces)
