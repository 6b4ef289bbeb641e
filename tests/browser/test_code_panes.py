"""The Jaxpr pane in a real page: full width on demand, long lines wrapped, height resizable.

A new user saw the jaxpr cut at half the inspector's width, with no wrap and no way to
make the pane taller; the toolbar now offers both, and the pane's corner resizes it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import inspector, open_in_lab, run_all, select_tab, wait_idle
from tests.browser.test_diff_tab import CELL

pytestmark = pytest.mark.browser

NOTEBOOK = "code_panes.ipynb"


@pytest.fixture(scope="module")
def jaxpr_pane(jupyter: JupyterServer, module_page: Any) -> Any:
    cells = ["%load_ext pallaslab", CELL.format(diff="", block=128)]
    write_notebook(jupyter.root / NOTEBOOK, cells)
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    run_all(page)
    found = inspector(page)
    wait_idle(page)
    return select_tab(found, "jaxpr")


def test_the_jaxpr_wraps_and_takes_the_full_width(jaxpr_pane):
    pane = jaxpr_pane
    text = pane.locator(".pl-split > .pl-pane").last
    body = text.locator(".pl-code-body")
    overflows = "e => e.scrollWidth > e.clientWidth + 1"
    # At half width the jaxpr's first line (its refs' types) runs past the pane.
    assert body.evaluate(overflows) is True
    pane.locator("input.pl-wrapLines").check()
    assert body.evaluate(overflows) is False
    half = text.bounding_box()["width"]
    pane.locator("input.pl-layoutStacked").check()
    full = text.bounding_box()["width"]
    assert full > 1.8 * half, (half, full)
    # The text comes first, its source below it.
    panes = pane.locator(".pl-split > .pl-pane")
    assert text.bounding_box()["y"] < panes.first.bounding_box()["y"]
    assert body.evaluate("e => getComputedStyle(e).resize") == "vertical"
    screenshot(pane.page, "jaxpr-full-width")
