"""The inspector's static view where a new user meets it first: an untrusted notebook.

A fresh clone's notebooks are untrusted, so JupyterLab shows each inspector's static
HTML through its sanitizer, which drops `<style>` and `<svg>`. The view must still
read as the widget does: styled (inline styles survive), tabs as folded sections with
the Kernels tab open, tile pictures as images, highlighted code, and every user
string as text.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jax.experimental import pallas as pl
from playwright.sync_api import expect

import pallaslab
from pallaslab._src.records.diffs import Diff
from pallaslab._src.views import diffview
from pallaslab._src.views.inspector import Inspector
from tests import corpus
from tests.browser.conftest import JupyterServer, screenshot
from tests.browser.lab import no_injected_markup, open_in_lab

pytestmark = pytest.mark.browser

XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
NOTEBOOK = "static_view_untrusted.ipynb"


def checked_matmul():
    case = corpus.seed_matmul()
    inspection = pallaslab.inspect(case.fn, *case.args)
    return inspection.with_result(inspection.run(ref=case.reference))


def evil_copy():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    fn = pl.pallas_call(
        kernel,
        out_shape=corpus.f32(256),
        grid=(2,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
        name=XSS,
    )
    return pallaslab.inspect(fn, corpus.f32(256))


def two_block_sizes():
    """`pallaslab.diff` of the seed matmul with 64x64 and 128x128 blocks."""
    args = corpus.seed_matmul(256, 256, 128).args
    small = pallaslab.inspect(corpus.make_seed_matmul(64, 64, 32), *args)
    large = pallaslab.inspect(corpus.make_seed_matmul(128, 128, 32), *args)
    return pallaslab.diff(small, large, resources=False)


def output_of(shown) -> dict[str, Any]:
    """The cell output a kernel would have saved: the widget's view and its fallbacks."""
    if isinstance(shown, Diff):
        data, metadata = diffview.bundle(shown), {}
    else:
        data, metadata = Inspector(shown)._repr_mimebundle_()
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def write_saved_notebook(path, inspections) -> None:
    """A notebook as saved after a run, never signed (untrusted), widget state dropped."""
    cells = [
        {
            "id": f"cell-{k}",
            "cell_type": "code",
            "metadata": {},
            "source": "%%kernel ...",
            "execution_count": k + 1,
            "outputs": [output_of(inspection)],
        }
        for k, inspection in enumerate(inspections)
    ]
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "cells": cells,
    }
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


@pytest.fixture(scope="module")
def saved(jupyter: JupyterServer, module_page: Any) -> Any:
    write_saved_notebook(
        jupyter.root / NOTEBOOK, [checked_matmul(), evil_copy(), two_block_sizes()]
    )
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    first = page.locator(".jp-OutputArea-output .pallaslab-static").first
    expect(first).to_be_visible(timeout=120_000)
    return page


def test_the_untrusted_static_view_is_styled_and_folded(saved):
    page = saved
    view = page.locator(".jp-OutputArea-output .pallaslab-static").first
    style = view.evaluate(
        "e => { const s = getComputedStyle(e); return [s.borderTopWidth, s.backgroundColor,"
        " s.borderTopLeftRadius]; }"
    )
    assert style == ["1px", "rgb(255, 255, 255)", "6px"]
    sections = view.locator(":scope > details")
    assert sections.count() == 6
    titles = [t.strip() for t in view.locator(":scope > details > summary > b").all_inner_texts()]
    assert titles == ["Kernels", "Source", "Jaxpr", "Tiles", "IR", "Run"]
    opened = view.evaluate(
        "e => Array.from(e.querySelectorAll(':scope > details')).map(d => d.open)"
    )
    assert opened == [True, False, False, False, False, False]
    expect(view.locator(":scope > details").first).to_contain_text("_matmul_kernel")
    expect(view.locator(":scope > details").nth(5).locator("summary")).to_contain_text(
        "matches the reference"
    )
    # The Kernels table is drawn with borders (inline styles survive the sanitizer).
    cell = view.locator("table.pl-table td").first
    assert cell.evaluate("e => getComputedStyle(e).borderTopStyle") == "solid"
    screenshot(page, "static-view-untrusted")


def test_tile_pictures_survive_as_images(saved):
    view = saved.locator(".jp-OutputArea-output .pallaslab-static").first
    view.locator(":scope > details > summary", has_text="Tiles").click()
    pictures = view.locator(":scope > details").nth(3).locator("img")
    expect(pictures.first).to_be_visible()
    assert pictures.count() == 3
    sizes = pictures.evaluate_all("images => images.map(i => [i.naturalWidth, i.complete])")
    assert all(width > 0 and complete for width, complete in sizes), sizes
    expect(view.locator("figcaption").first).to_contain_text("a_ref (in) f32[256,128]")
    screenshot(saved, "static-view-tiles")


def test_code_is_highlighted(saved):
    view = saved.locator(".jp-OutputArea-output .pallaslab-static").first
    view.locator(":scope > details > summary", has_text="Source").click()
    source = view.locator(":scope > details").nth(1).locator("pre").first
    expect(source).to_contain_text("def _matmul_kernel")
    keyword = source.locator("span", has_text="def").first
    assert keyword.evaluate("e => getComputedStyle(e).color") == "rgb(207, 34, 46)"


def test_user_strings_stay_text(saved):
    page = saved
    evil = page.locator(".jp-OutputArea-output .pallaslab-static").nth(1)
    expect(evil.locator(".pl-kernel-name").first).to_have_text(XSS)
    assert no_injected_markup(page) == {"pwned": None, "images": 0, "scripts": 0}
    assert page.errors.ours() == []


def test_a_saved_diff_reads_as_its_tab(saved):
    view = saved.locator(".jp-OutputArea-output .pallaslab-diff").first
    view.scroll_into_view_if_needed()
    expect(view).to_be_visible()
    assert view.evaluate("e => getComputedStyle(e).borderTopStyle") == "solid"
    summary = view.locator(":scope > p").first
    expect(summary).to_contain_text("HBM traffic")
    assert summary.evaluate("e => getComputedStyle(e).fontWeight") == "600"
    ir = view.locator("details.pl-diff-ir[open]").first
    changed = ir.locator("tr.pl-diff-replace").first
    expect(changed.locator("td")).to_have_count(6)
    tints = [
        changed.locator("td").nth(k).evaluate("e => getComputedStyle(e).backgroundColor")
        for k in (2, 5)
    ]
    assert tints == ["rgb(255, 235, 233)", "rgb(218, 251, 225)"], tints
    screenshot(saved, "static-view-diff")
