"""A 100k-line jaxpr: the page stays usable and the websocket keeps working.

Tornado refuses websocket messages over 10 MiB, and a page with 100k highlighted
rows grinds to a halt. The inspector draws the first lines inline; "Open in new
tab" fetches the whole text from the kernel in chunks and shows it in CodeMirror,
which only draws what is on screen.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import inspector, open_in_lab, run_all, select_tab, wait_for_output

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OPS = 100_000
BIG = f"""%%kernel big(x) --no-run
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def big_kernel(x_ref, o_ref):
    v = x_ref[...]
    one = jnp.ones_like(v)
    for _ in range({OPS}):  # one jaxpr line each
        v = jax.lax.add(v, one)
    o_ref[...] = v

big = pl.pallas_call(big_kernel, out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
x = jnp.zeros((128,), jnp.float32)"""
AFTER = 'print("still talking", 6 * 7)'
# Tracing and printing 100k equations takes a while on a loaded 2-core machine.
TIMEOUT_MS = 600_000


@pytest.fixture(scope="module")
def big(jupyter: JupyterServer, module_page: Any) -> Any:
    write_notebook(jupyter.root / "big.ipynb", ["%load_ext pallaslab", BIG, AFTER])
    page = module_page
    open_in_lab(page, jupyter, "big.ipynb")
    run_all(page)
    found = inspector(page, timeout=TIMEOUT_MS)
    wait_for_output(page, "still talking 42", timeout=TIMEOUT_MS)
    return found


def test_the_inspector_shows_the_first_lines_and_says_so(big):
    pane = select_tab(big, "jaxpr")
    text_pane = pane.locator(".pl-split > .pl-pane").nth(1)
    notice = text_pane.locator(".pl-clipped")
    expect(notice).to_contain_text(re.compile(r"Showing the first 3,000 of 100,0\d\d lines"))
    assert text_pane.locator(".pl-line").count() == 3000
    screenshot(big.page, "large-inline")


def test_the_whole_text_opens_in_a_new_tab(big):
    page = big.page
    pane = select_tab(big, "jaxpr")
    pane.locator(".pl-open-text").click()
    view = page.locator(".pl-lab-textview").last
    expect(view).to_be_visible(timeout=120_000)
    expect(view.locator(".pl-lab-textview-header")).to_contain_text(re.compile(r"100,0\d\d lines"))
    # The last lines are there: jump to the end of the document.
    view.locator(".cm-content").press("Control+End")
    expect(view.locator(".pl-lab-textview-status")).to_contain_text(re.compile(r"Line 100\d{3} "))
    expect(view.locator(".cm-content")).to_contain_text("in () }")
    expect(view.locator(".cm-content .tok-keyword").first).to_be_visible()
    # Line numbers count the whole text.
    expect(view.locator(".cm-lineNumbers")).to_contain_text(re.compile(r"100,?0\d\d"))
    screenshot(page, "large-new-tab")


def test_the_kernel_and_widget_still_answer(big):
    page = big.page
    # Switching tabs round-trips through the kernel (the "selected" trait).
    pane = select_tab(big, "source")
    expect(pane.locator(".pl-line", has_text="def big_kernel").first).to_be_visible()
    wait_for_output(page, "still talking 42")
    assert page.errors.ours() == []
