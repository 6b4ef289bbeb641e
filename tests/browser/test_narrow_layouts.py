"""The inspector and the benchmark view laid out at 1600 px and in a 600 px pane.

A matmul run with `--bench` and `--target ptx:sm_90` fills every toolbar there is:
the Kernels header and tabs, the Jaxpr and IR toolbars (pickers, layout controls,
a status), the Tiles controls and the benchmark's metric buttons. At both widths
no control's text may wrap inside it (a label stays whole, with its control), and
nothing may reach past the inspector's edge. The benchmark's bars are measured
against the timings the kernel printed (a CSS rule for another component once made
every bar an 80 x 8 strip), and the Tiles tab's columns against themselves while
the scrubber moves.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import inspector, open_in_lab, run_all, select_tab, wait_for_output

pytestmark = pytest.mark.browser

NOTEBOOK = "narrow_layouts.ipynb"
MATMUL = """%%kernel matmul(a, b) --ref "lambda a, b: a @ b" --bench --target ptx:sm_90
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

BM = BN = 64

def matmul_kernel(a_ref, b_ref, o_ref):
    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        grid=(M // BM, N // BN),
        in_specs=[pl.BlockSpec((BM, K), lambda i, j: (i, 0)),
                  pl.BlockSpec((K, BN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
    )(a, b)

a = jax.random.normal(jax.random.key(0), (256, 64))
b = jax.random.normal(jax.random.key(1), (64, 192))"""
TIMINGS = 'print("TIMINGS", _bench[["impl", "median_ms"]].to_json(orient="records"))'
BENCH_VIEW = ".jp-OutputArea-output .pallaslab.pl-bench"

# What wraps inside a control, and what reaches past the inspector's edge, measured
# in the page: each control's text as line boxes (a Range's client rects).
LAYOUT_PROBLEMS = """root => {
  const box = root.getBoundingClientRect();
  const found = [];
  // Lines of an element's text: its text nodes' boxes, one line per band of boxes
  // that overlap vertically (a control's own box, a checkbox, is not text).
  const lines = e => {
    const rects = [];
    const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim() || node.parentElement.closest('select, option')) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      rects.push(...Array.from(range.getClientRects()).filter(r => r.width > 0));
    }
    rects.sort((a, b) => a.top - b.top);
    let count = 0, bottom = -Infinity;
    for (const r of rects) {
      if (r.top >= bottom - 1) { count++; bottom = r.bottom; }
      else bottom = Math.max(bottom, r.bottom);
    }
    return count;
  };
  const controls = root.querySelectorAll(
    '.pl-toolbar > *, .pl-header > *, .pl-tabs > *, .pl-layout > *, .pl-progress > *');
  for (const e of controls) {
    const r = e.getBoundingClientRect();
    if (e.hidden || r.width === 0 || e.matches('.pl-layout')) continue;
    const name = (e.className.baseVal ?? e.className) + ' "' + e.textContent.slice(0, 40) + '"';
    if (r.right > box.right + 1 || r.left < box.left - 1) found.push('outside: ' + name);
    const words = e.textContent.trim().split(/\\s+/).length;
    const free = e.matches('.pl-toolbar-note, .pl-aside, .pl-progress-text');
    if (!free && lines(e) > 1) found.push('wraps: ' + name);
    // Free text may wrap between words, never down to a word or two per line.
    if (free && lines(e) > 1 && words / lines(e) < 3) found.push('word per line: ' + name);
  }
  if (root.scrollWidth > root.clientWidth + 1) found.push('the view scrolls sideways');
  return found;
}"""


@pytest.fixture(scope="module")
def lab(jupyter: JupyterServer, module_page: Any) -> SimpleNamespace:
    write_notebook(jupyter.root / NOTEBOOK, ["%load_ext pallaslab", MATMUL, TIMINGS])
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    run_all(page)
    printed = wait_for_output(page, "TIMINGS").inner_text()
    timings = {r["impl"]: r["median_ms"] for r in json.loads(printed.split("TIMINGS", 1)[1])}
    found = inspector(page)
    bench = page.locator(BENCH_VIEW).first
    bench.locator("svg.pl-plot").wait_for()
    # The chrome around an output (sidebar, prompt, margins), to size the pane.
    chrome = page.viewport_size["width"] - found.evaluate("e => e.clientWidth")
    return SimpleNamespace(page=page, inspector=found, bench=bench, timings=timings, chrome=chrome)


def pane_of_width(lab: SimpleNamespace, width: int) -> None:
    """Resizes the page so that the inspector is `width` pixels wide."""
    page = lab.page
    page.set_viewport_size({"width": width + lab.chrome, "height": 1000})
    page.wait_for_function(
        "([e, w]) => Math.abs(e.clientWidth - w) < 40",
        arg=[lab.inspector.element_handle(), width],
        timeout=10_000,
    )


def test_bench_bars_are_as_tall_as_their_timings(lab):
    pane_of_width(lab, 1600)
    lab.bench.scroll_into_view_if_needed()
    bars = lab.bench.locator("svg.pl-plot[data-metric='time'] rect[data-impl]")
    assert bars.count() == 2
    # Attributes in the plot's own units, boxes in pixels: the plot may be scaled.
    drawn = bars.evaluate_all(
        """rects => rects.map(r => {
            const box = r.getBoundingClientRect();
            const plot = r.ownerSVGElement;
            const units = plot.viewBox.baseVal;
            const scale = units && units.width
                ? plot.getBoundingClientRect().width / units.width : 1;
            return {impl: r.dataset.impl, width: box.width, height: box.height,
                    attrWidth: Number(r.getAttribute('width')) * scale,
                    attrHeight: Number(r.getAttribute('height')) * scale};
        })"""
    )
    screenshot(lab.page, "bench-bars")
    by_impl = {d["impl"]: d for d in drawn}
    for bar in drawn:
        # Drawn as the plot sized it, not by a stylesheet (no 80 x 8 strips).
        assert abs(bar["width"] - bar["attrWidth"]) <= 1, bar
        assert abs(bar["height"] - bar["attrHeight"]) <= 1, bar
    # Against the data: bars start at zero, so heights are in the ratio of the medians.
    ratio = by_impl["pallas"]["height"] / by_impl["xla"]["height"]
    expected = lab.timings["pallas"] / lab.timings["xla"]
    assert abs(ratio / expected - 1) < 0.03, (ratio, expected, lab.timings)


@pytest.mark.parametrize("width", [1600, 600])
def test_no_control_wraps_or_overflows(lab, width):
    pane_of_width(lab, width)
    problems = {}
    for tab in ("overview", "jaxpr", "tiles", "ir"):
        select_tab(lab.inspector, tab)
        if tab == "ir":
            ir = lab.inspector.locator(".pl-body[data-tab='ir'] .pl-toolbar")
            ir.filter(has_text="linked to source").wait_for()
        found = lab.inspector.evaluate(LAYOUT_PROBLEMS)
        if found:
            problems[tab] = found
        screenshot(lab.page, f"layout-{tab}-{width}px")
    lab.bench.scroll_into_view_if_needed()
    if found := lab.bench.evaluate(LAYOUT_PROBLEMS):
        problems["bench"] = found
    screenshot(lab.page, f"layout-bench-{width}px")
    assert problems == {}


@pytest.mark.parametrize("width", [1600, 600])
def test_tiles_columns_hold_still_while_scrubbing(lab, width):
    pane_of_width(lab, width)
    pane = select_tab(lab.inspector, "tiles")
    scrub = pane.locator("input[data-role='scrub']")
    programs = int(scrub.get_attribute("max")) + 1
    assert programs == 12  # a 4 x 3 grid

    def positions() -> list[list[float]]:
        return pane.evaluate(
            """pane => Array.from(pane.querySelectorAll(
                    '.pl-tiles > .pl-tiles-operands > .pl-tiles-operand, .pl-tiles-controls > *'))
                .map(e => { const r = e.getBoundingClientRect();
                            return [Math.round(r.left), Math.round(r.width)]; })"""
        )

    def inside() -> list[list[float]]:
        """The columns of "Inside the block", once they show the program pinned."""
        box = pane.locator("[data-role='accesses']")
        pane.page.wait_for_function(
            "([box, tiles]) => box.dataset.status === 'ready'"
            " && box.dataset.program === tiles.dataset.program",
            arg=[box.element_handle(), pane.locator(".pl-tiles").element_handle()],
        )
        return box.evaluate(
            """box => Array.from(box.querySelectorAll('.pl-tiles-operand'))
                .map(e => { const r = e.getBoundingClientRect();
                            return [Math.round(r.left), Math.round(r.width)]; })"""
        )

    before = positions()
    first_inside = inside()
    seen = set()
    for program in range(programs):
        scrub.evaluate(
            "(e, v) => { e.value = String(v); e.dispatchEvent(new Event('input')); }", program
        )
        seen.add(pane.locator(".pl-tiles").get_attribute("data-program"))
        assert positions() == before, f"columns moved at program {program}"
        assert inside() == first_inside, f"the accesses' columns moved at program {program}"
    assert len(seen) == programs
    screenshot(lab.page, f"tiles-scrubbed-{width}px")
