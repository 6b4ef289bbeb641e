"""User strings render as text everywhere: no markup in a kernel's name, docstring,
`debug_print` format or file path ever becomes HTML (inspector, new-tab view, the
static HTML of saved notebooks), and no script they carry runs.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import (
    inspector,
    no_injected_markup,
    open_in_lab,
    run_all,
    save,
    select_tab,
    wait_for_output,
    wait_idle,
)

pytestmark = pytest.mark.browser

XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
FOLDER = "<script>"
FILE = "<img src=x onerror=window.__pwned=3>.py"
NOTEBOOK = "security.ipynb"

SETUP = f'''import importlib.util, pathlib
XSS = {XSS!r}
MODULE = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def evil_kernel(x_ref, o_ref):
    \\"\\"\\"DOCSTRING\\"\\"\\"
    pl.debug_print(FORMAT, pl.program_id(0))
    o_ref[...] = x_ref[...] * 2

def build(name):
    return pl.pallas_call(evil_kernel, out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                          grid=(2,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
                          out_specs=pl.BlockSpec((128,), lambda i: (i,)), name=name)
""".replace("DOCSTRING", XSS).replace("FORMAT", repr(XSS + " program {{}}"))
path = pathlib.Path({FOLDER!r}) / {FILE!r}
path.parent.mkdir(exist_ok=True)
path.write_text(MODULE)
spec = importlib.util.spec_from_file_location("evil_module", path)
evil_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(evil_module)
print("module at", path)'''

KERNEL = """%%kernel evil(x) --ref "x * 2"
import jax.numpy as jnp
evil = evil_module.build(XSS)
x = jnp.arange(256, dtype=jnp.float32)"""


def assert_clean(page: Any) -> None:
    assert no_injected_markup(page) == {"pwned": None, "images": 0, "scripts": 0}


@pytest.fixture(scope="module")
def evil(jupyter: JupyterServer, module_page: Any) -> Any:
    write_notebook(jupyter.root / NOTEBOOK, ["%load_ext pallaslab", SETUP, KERNEL])
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    run_all(page)
    found = inspector(page)
    wait_idle(page)
    return found


def test_kernel_name_renders_as_text(evil):
    page = evil.page
    pane = select_tab(evil, "overview")
    expect(pane.locator(".pl-kernel h4")).to_have_text(XSS)
    assert_clean(page)


def test_file_path_and_docstring_render_as_text(evil):
    pane = select_tab(evil, "source")
    expect(pane.locator(".pl-code-title", has_text=FILE)).to_have_count(1)
    expect(pane.locator(".pl-line", has_text=XSS).first).to_be_visible()
    assert_clean(evil.page)


def test_debug_print_format_renders_as_text(evil):
    pane = select_tab(evil, "jaxpr")
    expect(pane.locator(".pl-line", has_text="debug_print").first).to_be_visible()
    expect(pane.locator(".pl-line", has_text="<img src=x onerror=").first).to_be_visible()
    assert_clean(evil.page)


def test_the_new_tab_view_renders_text(evil):
    page = evil.page
    pane = select_tab(evil, "jaxpr")
    pane.locator(".pl-open-text").click()
    view = page.locator(".pl-lab-textview").last
    expect(view.locator(".cm-content")).to_contain_text("<img src=x onerror=")
    expect(view.locator(".cm-content")).to_contain_text("<script>window.__pwned=2</script>")
    screenshot(page, "security-new-tab")
    assert_clean(page)


def test_debug_print_output_is_text(evil):
    page = evil.page
    output = wait_for_output(page, "program 1")
    assert XSS in output.inner_text()
    assert_clean(page)


def test_saved_notebook_static_html_renders_text(evil, jupyter):
    """Saved and reopened without its kernel: the static HTML, escaped, in its place."""
    page = evil.page
    save(page)
    page.wait_for_timeout(1000)
    saved = jupyter.api("GET", f"/api/contents/{NOTEBOOK}")
    outputs = [o for cell in saved["content"]["cells"] for o in cell.get("outputs", [])]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert html and "&lt;img src=x" in "".join(html) and "<img src=x" not in "".join(html)
    # A new kernel: the widget's model is gone, as in a notebook opened tomorrow.
    for session in jupyter.api("GET", "/api/sessions"):
        if session["path"].endswith(NOTEBOOK):
            jupyter.api("DELETE", f"/api/sessions/{session['id']}")
    page.reload()
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
    fallback = page.locator(".pl-lab-fallback .pallaslab-static").first
    expect(fallback).to_be_visible(timeout=120_000)
    expect(fallback).to_contain_text(XSS)
    expect(page.locator(".jp-OutputArea-output", has_text="model not found")).to_have_count(0)
    screenshot(page, "security-saved-static")
    assert_clean(page)
    assert page.errors.ours() == []
