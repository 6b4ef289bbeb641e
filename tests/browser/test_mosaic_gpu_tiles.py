"""A Mosaic GPU kernel's Tiles tab in JupyterLab: SMEM per chip and pipeline steps on the page.

Oracle: the kernel's figures by hand. A (256, 512) @ (512, 256) f16 matmul in
(128, 128) tiles with `emit_pipeline` over K in steps of 64 keeping 3 slots: 8 steps;
SMEM = 3 x (128 x 64 + 64 x 128) x 2 bytes of pipeline buffers + 3 barriers of 8 bytes
= 98,328 bytes (each buffer a multiple of 1 KiB already).
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import inspector, open_in_lab, run_all, select_tab, wait_idle

pytestmark = pytest.mark.browser

NOTEBOOK = "mosaic_tiles.ipynb"
KERNEL = """%%kernel matmul(a, b) --no-run
import jax, jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

tiles = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))

def kernel(a_gmem, b_gmem, o_gmem, acc_ref):
    mi, ni = lax.axis_index("m"), lax.axis_index("n")
    def step(_, a_smem, b_smem):
        plgpu.wgmma(acc_ref, a_smem, b_smem)
        plgpu.wgmma_wait(1)
    plgpu.emit_pipeline(
        step, grid=(512 // 64,), max_concurrent_steps=3,
        in_specs=[plgpu.BlockSpec((128, 64), lambda k: (mi, k), transforms=tiles),
                  plgpu.BlockSpec((64, 128), lambda k: (k, ni), transforms=tiles)],
    )(a_gmem, b_gmem)
    o_gmem[pl.ds(mi * 128, 128), pl.ds(ni * 128, 128)] = acc_ref[...].astype(jnp.float16)

def matmul(a, b):
    return plgpu.kernel(kernel, out_type=jax.ShapeDtypeStruct((256, 256), jnp.float16),
                        scratch_types=[plgpu.ACC((128, 128), jnp.float32)],
                        grid=(2, 2), grid_names=("m", "n"))(a, b)

a = jax.ShapeDtypeStruct((256, 512), jnp.float16)
b = jax.ShapeDtypeStruct((512, 256), jnp.float16)"""


@pytest.fixture(scope="module")
def mosaic(jupyter: JupyterServer, module_page: Any) -> Any:
    write_notebook(jupyter.root / NOTEBOOK, ["%load_ext pallaslab", KERNEL])
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    run_all(page)
    found = inspector(page)
    wait_idle(page)
    return found


def test_tiles_tab_reads_the_smem_budget_and_pipeline_steps(mosaic):
    pane = select_tab(mosaic, "tiles")
    part = pane.locator("[data-role=mosaic]")
    expect(part).to_have_count(1)
    total = part.locator("[data-role=smem-total]")
    expect(total).to_have_attribute("data-bytes", str(3 * (128 * 64 + 64 * 128) * 2 + 3 * 8))
    expect(total).to_contain_text("98,328 bytes")
    h100 = part.locator("[data-chip=H100]")
    expect(h100).to_have_attribute("data-fits", "true")
    expect(h100).to_contain_text("of 227 KiB")
    pipeline = part.locator("[data-role=pipeline]")
    expect(pipeline).to_have_count(1)
    expect(pipeline).to_have_attribute("data-steps", "8")
    expect(pipeline).to_have_attribute("data-slots", "3")
    expect(pipeline).to_contain_text("TilingTransform((8, 64)), SwizzleTransform(128)")
    expect(part.locator("[data-role=copy]")).to_have_count(3)  # A, B in; the tile out
    # No error box: element accesses are not asked for, one sentence says why.
    expect(pane.locator(".pl-problem")).to_have_count(0)
    expect(pane.locator("[data-role=accesses]")).to_have_attribute("data-status", "none")
    # The operands are cut into the windows the copies move: 2 x 2 CTAs x 8 steps.
    expect(pane.locator(".pl-facts").first).to_contain_text("grid 2 \u00d7 2 \u00d7 8")
    part.scroll_into_view_if_needed()
    screenshot(mosaic.page, "mosaic-gpu-tiles")
