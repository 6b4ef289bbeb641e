"""`%%kernel ... --diff NAME` in JupyterLab: the Diff tab under the cell's inspector.

Two versions of a blocked add, BLOCK 128 then 256: the second cell's diff view shows
the one-line summary first, each IR's two sides in aligned columns, and the lines
that changed marked on both sides.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import open_in_lab, run_all, wait_idle

pytestmark = pytest.mark.browser

NOTEBOOK = "diff.ipynb"
CELL = """%%kernel add(x, y) --no-run{diff}
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = {block}

def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]

add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((8, 1024), jnp.float32),
                     grid=(1024 // BLOCK,),
                     in_specs=[pl.BlockSpec((8, BLOCK), lambda i: (0, i))] * 2,
                     out_specs=pl.BlockSpec((8, BLOCK), lambda i: (0, i)))
x = jnp.ones((8, 1024)); y = 2 * x"""
DIFF_VIEW = ".jp-OutputArea-output .pallaslab:has(.pl-tab[data-tab='diff'])"


@pytest.fixture(scope="module")
def diffed(jupyter: JupyterServer, module_page: Any) -> Any:
    cells = [
        "%load_ext pallaslab",
        CELL.format(diff="", block=128),
        CELL.format(diff=" --diff _kernel", block=256),
    ]
    write_notebook(jupyter.root / NOTEBOOK, cells)
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    run_all(page)
    view = page.locator(DIFF_VIEW).first
    try:
        view.locator(".pl-diff-summary").wait_for(timeout=240_000)
    except Exception:
        screenshot(page, "no-diff-view")
        raise
    wait_idle(page)
    view.scroll_into_view_if_needed()
    return view


def test_the_diff_tab_leads_with_the_summary(diffed):
    expect(diffed.locator(".pl-tab")).to_have_text(["Diff"])
    expect(diffed.locator(".pl-title")).to_have_text("diff _kernel → this cell")
    summary = diffed.locator(".pl-body[data-tab='diff'] > .pl-diff-summary")
    expect(summary).to_have_text(re.compile(r"^BLOCK 128→256: "))
    # The kernel's blocks are among the figures that changed.
    kernel = diffed.locator(".pl-diff-group[data-group='kernel']")
    expect(kernel.locator("tr", has_text="block x_ref")).to_contain_text("(8, 256)")


def test_each_ir_is_two_aligned_columns_with_changes_marked(diffed):
    ir = diffed.locator(".pl-diff-ir").filter(has=diffed.page.locator(".pl-diff-lines")).first
    expect(ir).to_be_visible()
    headings = ir.locator("thead th").all_inner_texts()
    assert headings[0] == "a" and headings[3] == "b", headings
    assert headings[2] == headings[5], headings  # one IR on both sides
    changed = ir.locator("tr.pl-diff-replace").first
    expect(changed).to_be_visible()
    cells = changed.locator("td")
    expect(cells).to_have_count(6)
    expect(cells.nth(2)).to_have_class(re.compile(r"\bpl-diff-old\b"))
    expect(cells.nth(5)).to_have_class(re.compile(r"\bpl-diff-new\b"))
    # The two sides differ where the block does (128 against 256).
    old, new = cells.nth(2).inner_text(), cells.nth(5).inner_text()
    assert old != new and "128" in old and "256" in new, (old, new)
    tints = [cells.nth(k).evaluate("e => getComputedStyle(e).backgroundColor") for k in (2, 5)]
    assert tints[0] != tints[1] and "rgba(0, 0, 0, 0)" not in tints, tints
    # Source links on both sides: each side's own cell, its line's text on hover.
    # The first IR is the BlockSpecs section: its rows link to the in_specs line (12).
    linked = ir.locator("tr.pl-diff-row").filter(has=diffed.page.locator(".pl-diff-source")).first
    expect(linked.locator("td").nth(1)).to_have_text("Cell [2]:12")
    expect(linked.locator("td").nth(4)).to_have_text("Cell [3]:12")
    title = linked.locator("td").nth(4).locator(".pl-diff-source").get_attribute("title")
    assert title == "in_specs=[pl.BlockSpec((8, BLOCK), lambda i: (0, i))] * 2,", title
    screenshot(diffed.page, "diff-tab")
    changed.scroll_into_view_if_needed()
    screenshot(diffed.page, "diff-tab-ir")
