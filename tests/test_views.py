"""The inspector widget's state and its static fallback, tested without a browser."""

from __future__ import annotations

import json
import re

import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.views import highlight
from pallaslab._src.views.header import Problem
from pallaslab._src.views.inspector import Inspector
from pallaslab._src.views.static_page import static_page
from pallaslab._src.views.tabs import all_tabs
from tests import corpus, frontend

XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


@pytest.fixture(scope="module")
def inspection():
    case = corpus.seed_matmul()
    insp = pallaslab.inspect(case.fn, *case.args)
    return insp.with_result(insp.run(ref=case.reference))


def test_tabs_and_eager_panes(inspection):
    widget = Inspector(inspection)
    assert [t["id"] for t in widget.tabs] == ["overview", "source", "jaxpr", "tiles", "ir", "run"]
    assert widget.selected == "overview"
    assert set(widget.panes) == {t.id for t in all_tabs() if t.eager}
    json.dumps(widget.panes)  # everything sent to the browser is JSON
    assert widget.header["check"] is True
    assert widget.header["kernels"] == [{"name": "_matmul_kernel", "grid": [4, 4]}]


def test_lazy_tabs_are_built_when_selected(inspection, monkeypatch):
    from pallaslab._src.views import tabs as tabs_module

    built = []
    lazy = tabs_module.Tab("lazy", "Lazy", lambda i: built.append(i) or {"n": 1}, eager=False)
    monkeypatch.setattr(tabs_module, "all_tabs", lambda: [*all_tabs(), lazy])
    from pallaslab._src.views import inspector as inspector_module

    monkeypatch.setattr(inspector_module, "all_tabs", tabs_module.all_tabs)
    widget = Inspector(inspection)
    assert "lazy" not in widget.panes and not built
    widget.selected = "lazy"
    assert widget.panes["lazy"] == {"n": 1} and len(built) == 1
    widget.selected = "overview"
    widget.selected = "lazy"
    assert len(built) == 1  # built once


def test_a_failing_tab_shows_its_error_and_spares_the_others(inspection, monkeypatch):
    from pallaslab._src.views import inspector as inspector_module
    from pallaslab._src.views import tabs as tabs_module

    def broken(_):
        raise RuntimeError("boom")

    bad = tabs_module.Tab("bad", "Bad", broken)
    monkeypatch.setattr(inspector_module, "all_tabs", lambda: [*all_tabs(), bad])
    widget = Inspector(inspection)
    assert "boom" in widget.panes["bad"]["error"]
    assert "kernels" in widget.panes["overview"]


def test_jaxpr_pane_links_lines_to_source(inspection):
    pane = Inspector(inspection).panes["jaxpr"]
    kernel_view = pane["views"][0]
    assert kernel_view["title"] == "kernel _matmul_kernel"
    assert pane["views"][-1]["id"] == "program"
    files = pane["files"]
    assert files and files[0]["label"] == "corpus.py"
    text_lines = kernel_view["text"].splitlines()
    for line, file_index, source_line in kernel_view["map"]:
        source = files[file_index]
        assert source["first"] <= source_line < source["first"] + len(source["lines"])
        assert 1 <= line <= len(text_lines)
    # The dot in the jaxpr maps to the pl.dot line of the kernel.
    dot_lines = [n for n, text in enumerate(text_lines, 1) if "dot_general" in text]
    mapped = {line: (f, s) for line, f, s in kernel_view["map"]}
    f, s = mapped[dot_lines[0]]
    assert "dot(" in files[f]["lines"][s - files[f]["first"]]


def test_source_pane_marks_kernels_and_blockspecs(inspection):
    marks = Inspector(inspection).panes["source"]["files"][0]["marks"]
    kinds = {m["kind"] for m in marks}
    assert {"kernel", "blockspec"} <= kinds


def test_run_pane(inspection):
    run = Inspector(inspection).panes["run"]["result"]
    assert run["backend"] == "cpu" and run["mode"] == "emulated"
    assert "not representative" in run["note"]
    assert run["comparison"]["ok"] is True


def test_mimebundle_has_widget_html_and_stable_text(inspection):
    data, _ = Inspector(inspection)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "<details open>" in data["text/html"]
    assert "dot_general" in data["text/html"]
    text = data["text/plain"]
    assert text.splitlines()[0] == "pallaslab inspection of matmul"
    assert "ms" not in text and "0x" not in text  # no timings or addresses
    assert "matches the reference" in text


def test_inspection_displays_as_the_inspector(inspection):
    bundle_ = inspection._repr_mimebundle_()
    data = bundle_[0] if isinstance(bundle_, tuple) else bundle_
    assert "application/vnd.jupyter.widget-view+json" in data


def test_problem_banner(inspection):
    problem = Problem("Cell line 7", "something broke", "do this", "error")
    widget = Inspector(inspection, problem)
    assert widget.problem["where"] == "Cell line 7"
    assert "Cell line 7:" in static_page(inspection, problem)


def test_user_strings_are_escaped_in_static_html():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    fn = pl.pallas_call(kernel, out_shape=corpus.f32(128), name=XSS)
    inspection = pallaslab.inspect(fn, corpus.f32(128))
    assert inspection.kernels[0].name == XSS
    page = static_page(inspection, Problem(XSS, XSS, XSS))
    # The page's own images are pictures of tiles, as data: URIs (sanitizers keep them).
    images = re.findall(r"<img [^>]*>", page)
    assert all(
        re.fullmatch(r'<img src="data:image/svg\+xml;base64,[A-Za-z0-9+/=]+" alt="[^"<>]*">', i)
        for i in images
    )
    assert "<img src=x" not in page and "<script>" not in page
    assert "&lt;img src=x" in page
    Inspector(inspection)  # the widget takes the same strings as data


def test_javascript_never_parses_html():
    code = frontend.built("inspector")
    for sink in frontend.HTML_SINKS:
        assert sink not in code, sink
        assert sink not in frontend.source(), sink
    # An ES module whose default export anywidget renders.
    assert re.search(r"export\s*\{[^}]*\bas default\b", code)
    # Every tab has a renderer of the same id (tsc checks they are all there).
    registry = frontend.source("tabs/index.ts")
    for tab in all_tabs():
        assert re.search(rf"^  {tab.id}: [A-Z]+,?$", registry, re.MULTILINE), tab.id


def test_highlighting_rules_are_shared_with_javascript():
    # The widget embeds the one grammar file (patterns with quotes are written
    # with other quotes in JavaScript: checked without them).
    code = frontend.built("inspector")
    rules = [
        rule["pattern"]
        for spec in highlight.grammar_file()["languages"].values()
        for rule in spec["rules"]
        if '"' not in rule["pattern"]
    ]
    assert len(rules) > 80
    for pattern in rules:
        assert json.dumps(pattern) in code, pattern
    assert highlight.tokenize("  c:f32[8] = add a b", "jaxpr")[6] == ("op", "add")
    assert "&lt;" in highlight.highlight_html("x = '<b>'", "python")
