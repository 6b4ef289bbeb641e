"""The Kernels tab lists performance hints with their lines; masked lanes arrive on request."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import inspector, open_in_lab, run_all, select_tab, wait_idle

pytestmark = pytest.mark.browser

NOTEBOOK = "hints.ipynb"
# A Triton-style kernel: 16 programs (an H100 has 132 SMs), and a mask that switches
# on 20 of 128 lanes (found only by interpreting programs: asked for after drawing).
KERNEL = """%%kernel rows(x) --no-run
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

def rows_kernel(x_ref, o_ref):
    mask = jnp.arange(128) < 20
    row = pltriton.load(x_ref.at[pl.ds(0, 128)], mask=mask, other=0.0)
    pltriton.store(o_ref.at[pl.ds(0, 128)], row * 2, mask=mask)

rows = pl.pallas_call(rows_kernel, out_shape=jax.ShapeDtypeStruct((16, 20), jnp.float32),
                      grid=(16,), in_specs=[pl.BlockSpec((None, 20), lambda i: (i, 0))],
                      out_specs=pl.BlockSpec((None, 20), lambda i: (i, 0)))
x = jnp.ones((16, 20))"""


@pytest.fixture(scope="module")
def hinted(jupyter: JupyterServer, module_page: Any) -> Any:
    write_notebook(jupyter.root / NOTEBOOK, ["%load_ext pallaslab", KERNEL])
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    run_all(page)
    found = inspector(page)
    wait_idle(page)
    return found


def test_hints_show_with_their_cell_lines(hinted):
    pane = select_tab(hinted, "overview")
    hints = pane.locator(".pl-hints .pl-hint")
    grid = hints.filter(has_text="The grid runs 16 programs")
    expect(grid).to_have_count(1)
    # Called from the magic line, the kernel has no call site: its first BlockSpec's line.
    expect(grid).to_contain_text("Cell [2] line 12:")
    expect(grid).to_contain_text("(assumes H100)")
    # Masked lanes come from interpreting three programs, after the tab is drawn.
    masked = hints.filter(has_text="switches on 16% of its 128 lanes")
    expect(masked).to_have_count(2)  # the load and the store
    expect(masked.first).to_contain_text("Cell [2] line 8:")
    screenshot(hinted.page, "hints-tab")
