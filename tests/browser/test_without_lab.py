"""The inspector needs no lab extension: Notebook 7, and JupyterLab with it blocked.

The widgets are anywidgets: wherever Jupyter widgets work (Notebook 7, VS Code,
Colab) they render. The lab extension only adds what JupyterLab alone can do
("Open in new tab"), so its button must appear only where the extension says so.
"""

from __future__ import annotations

import importlib.util
import re
import shutil

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.browser.lab import (
    inspector,
    open_in_lab,
    open_in_notebook7,
    run_all,
    select_tab,
    wait_for_output,
)

pytestmark = pytest.mark.browser

KERNEL_LINE = "o_ref[...] = x_ref[...] + y_ref[...]"


def check_live_inspector(page, found):
    """The inspector is drawn, switches tabs and links lines, all without the extension."""
    expect(found.locator(".pl-header .pl-pass")).to_contain_text("matches reference")
    pane = select_tab(found, "jaxpr")
    panes = pane.locator(".pl-split > .pl-pane")
    panes.nth(1).locator(".pl-line[data-colour]", has_text="= add").first.hover()
    expect(panes.nth(0).locator(".pl-line.pl-active")).to_contain_text(KERNEL_LINE)
    pane = select_tab(found, "run")
    expect(pane.locator(".pl-verdict.pl-pass")).to_be_visible()
    # No "Open in new tab" where JupyterLab's extension is not listening.
    assert page.evaluate("window.__pallaslabLab") is None
    expect(found.locator(".pl-open-text")).to_have_count(0)


def test_notebook7_renders_the_inspector(jupyter, new_page):
    if importlib.util.find_spec("notebook") is None:
        pytest.fail("Notebook 7 is not installed: pip install -e '.[test]' brings it")
    shutil.copy(jupyter.root / "00_tour.ipynb", jupyter.root / "tour_notebook7.ipynb")
    page = new_page()
    open_in_notebook7(page, jupyter, "tour_notebook7.ipynb")
    run_all(page)
    error = wait_for_output(page, "KernelError")
    assert re.search(r"Cell line 3: Python .if.", error.inner_text())
    found = inspector(page)
    check_live_inspector(page, found)
    screenshot(page, "notebook7-tour")
    # Notebook 7.6 itself throws one error while loading settings, with or without us.
    assert page.errors.ours() == []


def test_jupyterlab_without_the_extension_renders_the_inspector(jupyter, new_page):
    shutil.copy(jupyter.root / "00_tour.ipynb", jupyter.root / "tour_no_extension.ipynb")
    page = new_page()
    blocked = []

    def block(route):
        blocked.append(route.request.url)
        route.abort()

    page.route(re.compile(r".*/lab/extensions/pallaslab/.*"), block)
    open_in_lab(page, jupyter, "tour_no_extension.ipynb")
    assert blocked, "the pallaslab lab extension was not requested, so not blocked"
    run_all(page)
    wait_for_output(page, "KernelError")
    found = inspector(page)
    check_live_inspector(page, found)
    screenshot(page, "lab-without-extension")
    assert page.errors.ours() == []
