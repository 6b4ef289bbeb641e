"""A new user's first session in JupyterLab, cell by cell, asserting what the screen says.

A new notebook: `%load_ext pallaslab`; a matmul written with a planted index-map bug
(b's BlockSpec maps program (i, j) to column block i where j belongs) checked with
`--ref`; the fix, run with `--diff _kernel`; block sizes tuned with `--tune`; the
kernel lowered with `--target ptx:sm_90`; then the notebook saved, its kernel shut
down, and the notebook opened again. The oracles are hand-computed (a 2 x 2 grid whose
wrong output blocks are those with i != j), the kernel's own records printed by a
cell (the tuning rows) and the prompts' execution counts.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import JupyterServer, screenshot, write_notebook
from tests.browser.lab import (
    KERNEL_TIMEOUT_MS,
    cell_number,
    notebook_cell,
    open_in_lab,
    run_cell,
    save,
    select_tab,
)

pytestmark = pytest.mark.browser

NOTEBOOK = "newcomer.ipynb"
REF = '--ref "lambda a, b: a @ b"'
MATMUL = """%%kernel matmul(a, b) {flags}
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
                  pl.BlockSpec((K, BN), lambda i, j: (0, {b_column}))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
    )(a, b)

a = jax.random.normal(jax.random.key(0), (128, 64))
b = jax.random.normal(jax.random.key(1), (64, 128))"""
# The cell's line of b's BlockSpec (the magic line is line 1).
B_SPEC_LINE = 17
ROWS = 'print("ROWS", json.dumps([[r.impl, r.config, r.status, r.median_ms, r.correct] for r in _tune.rows]))'
CELLS = [
    "%load_ext pallaslab",
    MATMUL.format(flags=REF, b_column="i"),  # the planted bug
    MATMUL.format(flags=f"{REF} --diff _kernel", b_column="j"),  # the fix
    MATMUL.format(flags=f"{REF} --tune BM=32,64 BN=64,128", b_column="j"),
    f"import json\n{ROWS}",
    MATMUL.format(flags="--target ptx:sm_90", b_column="j"),
]
DIFF_VIEW = ".jp-OutputArea-output .pallaslab:has(.pl-tab[data-tab='diff'])"
BENCH_VIEW = ".jp-OutputArea-output .pallaslab.pl-bench"


@pytest.fixture(scope="module")
def session(jupyter: JupyterServer, module_page: Any) -> SimpleNamespace:
    write_notebook(jupyter.root / NOTEBOOK, CELLS)
    page = module_page
    open_in_lab(page, jupyter, NOTEBOOK)
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    return SimpleNamespace(page=page, jupyter=jupyter, console=console, cells={})


def output_of(cell: Any) -> Any:
    return cell.locator(".jp-OutputArea-output")


def inspector_of(cell: Any) -> Any:
    """The cell's inspector (its first widget), once drawn."""
    found = cell.locator(".jp-OutputArea-output .pallaslab").first
    found.locator(".pl-header").wait_for(timeout=KERNEL_TIMEOUT_MS)
    found.scroll_into_view_if_needed()
    return found


def test_1_the_extension_loads_quietly(session):
    cell = run_cell(session.page, 0)
    assert output_of(cell).count() == 0  # no warning, no traceback


def test_2_the_planted_bug_fails_the_check_and_names_the_wrong_blocks(session):
    page = session.page
    cell = run_cell(page, 1)
    session.cells["bug"] = cell_number(cell)
    view = inspector_of(cell)
    expect(view.locator(".pl-header .pl-fail")).to_have_text("\u2717 differs from reference")
    run = select_tab(view, "run")
    expect(run.locator(".pl-verdict.pl-fail")).to_contain_text("does not match the reference")
    # A 2 x 2 grid reading b's column block i instead of j: exactly the output blocks
    # off the diagonal are wrong, and the programs that wrote them are named.
    heatmap = run.locator("svg.pl-heatmap")
    counts = heatmap.locator("rect").evaluate_all(
        "rects => rects.map(r => [Number(r.dataset.row), Number(r.dataset.col),"
        " Number(r.dataset.count)])"
    )
    assert sorted((r, c) for r, c, n in counts if n > 0) == [(0, 1), (1, 0)], counts
    expect(run).to_contain_text("2 of 4 blocks")
    expect(run).to_contain_text("programs writing them: (0, 1) (1, 0)")
    screenshot(page, "newcomer-2-planted-bug")


def test_3_the_fix_with_diff_shows_the_check_change(session):
    page = session.page
    cell = run_cell(page, 2)
    session.cells["fix"] = cell_number(cell)
    fixed = inspector_of(cell)
    expect(fixed.locator(".pl-header .pl-pass")).to_have_text("\u2713 matches reference")
    view = cell.locator(DIFF_VIEW).first
    view.locator(".pl-diff-summary").wait_for()
    view.scroll_into_view_if_needed()
    expect(view.locator(".pl-title")).to_have_text("diff _kernel \u2192 this cell")
    # The check went from differs to matches: a row of its own.
    check = view.locator(".pl-diff-group[data-group='check'] tr", has_text="check")
    expect(check.locator("td")).to_have_text(["check", "differs", "matches", re.compile(".*")])
    expect(view.locator(".pl-diff-summary")).to_contain_text("check differs\u2192matches")
    # The jaxpr's source links name the notebook's cells on both sides.
    links = view.locator(".pl-diff-src").all_inner_texts()
    numbers = {session.cells["bug"], session.cells["fix"]}
    assert {int(m) for t in links for m in re.findall(r"Cell \[(\d+)\]", t)} <= numbers
    screenshot(page, "newcomer-3-diff")


def test_3b_the_diff_names_the_index_map_it_fixed(session):
    view = notebook_cell(session.page, 2).locator(DIFF_VIEW).first
    view.scroll_into_view_if_needed()
    row = view.locator(".pl-diff-group[data-group='kernel'] tr", has_text="b_ref").filter(
        has_text="index map"
    )
    expect(row).to_have_count(1, timeout=2_000)
    expect(row).to_contain_text("(0, i)")
    expect(row).to_contain_text("(0, j)")
    # The summary leads with the verdict (a fix), the check it fixed and the change the
    # user made, and is marked as the improvement it is.
    summary = view.locator(".pl-diff-summary")
    text = summary.inner_text()
    assert text.startswith("fixed"), text
    assert text.index("check") < text.index("index map") < text.index("HBM"), text
    expect(summary).to_have_class(re.compile("pl-diff-better"))
    check = view.locator(".pl-diff-group[data-group='check'] tr", has_text="check")
    expect(check.locator(".pl-diff-better")).to_have_count(1)


def test_4_tuning_shows_the_table_and_the_best_config(session):
    page = session.page
    tuned = run_cell(page, 3, timeout=600_000)
    printed = run_cell(page, 4)
    text = output_of(printed).first.inner_text()
    rows = json.loads(text.split("ROWS", 1)[1])
    configs = [r for r in rows if r[0] == "pallas"]
    assert len(configs) == 4 and all(r[2] == "ok" and r[4] is True for r in configs), rows
    best = min(configs, key=lambda r: r[3])[1]
    view = tuned.locator(BENCH_VIEW).first
    view.scroll_into_view_if_needed()
    expect(view.locator(".pl-progress-text")).to_contain_text("4 / 4 configs")
    expect(view).to_contain_text(f"Best: BM={best['BM']}, BN={best['BN']} (")
    view.locator("[data-metric='table']").click()
    table = view.locator(".pl-bench-table tbody tr")
    expect(table).to_have_count(5)  # four configs, then the XLA baseline
    points = [t.split("\t")[1] for t in table.all_inner_texts()]
    assert points == [
        "BM=32, BN=64",
        "BM=32, BN=128",
        "BM=64, BN=64",
        "BM=64, BN=128",
        "XLA baseline",
    ], points
    screenshot(page, "newcomer-4-tune")


def test_5_the_target_opens_the_ir_tab_linked_to_the_source(session):
    page = session.page
    cell = run_cell(page, 5)
    session.cells["ptx"] = cell_number(cell)
    view = inspector_of(cell)
    pane = view.locator(".pl-body[data-tab='ir']")
    expect(view.locator(".pl-tab.pl-selected")).to_have_text("IR")
    status = pane.locator(".pl-ir-status")
    expect(status).to_contain_text("linked to source")
    lines, linked = map(int, re.findall(r"(\d+) lines, (\d+) linked", status.inner_text())[0])
    assert lines > 50 and linked > 0
    expect(pane.locator("select[aria-label='target']")).to_have_value("ptx:sm_90")
    text = pane.locator(".pl-pane").last
    expect(text).to_contain_text(".target sm_90")
    expect(text).to_contain_text(".entry matmul_kernel")
    source = pane.locator(".pl-pane").first
    expect(source.locator(".pl-code-title")).to_have_text(f"Cell [{session.cells['ptx']}]")
    # The dot's line is linked: hovering it lights PTX lines (the tensor-core mma).
    dot = source.locator(".pl-line", has_text="jnp.dot(a_ref[...]")
    dot.hover()
    lit = text.locator(".pl-line.pl-active")
    expect(lit.first).to_be_visible()
    assert all(t.strip() for t in lit.all_inner_texts())
    screenshot(page, "newcomer-5-ptx")


def test_6_saved_and_reopened_the_notebook_reads_as_it_did(session, new_page):
    page, jupyter = session.page, session.jupyter
    save(page)
    page.wait_for_function(
        "() => !document.querySelector('.jp-mod-current .jp-mod-dirty, .lm-TabBar-tab.jp-mod-dirty')"
    )
    jupyter.shutdown_sessions()  # the kernel is gone: the saved views must stand alone
    reopened = new_page()
    reopened.goto(jupyter.url(f"lab/tree/{NOTEBOOK}?reset"))
    reopened.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
    cells = [notebook_cell(reopened, k) for k in range(len(CELLS))]
    static = [c.locator(".jp-OutputArea-output .pallaslab-static").first for c in cells]
    expect(static[1]).to_be_visible(timeout=120_000)
    expect(reopened.locator("text=model not found")).to_have_count(0)

    def section(view: Any, title: str) -> Any:
        view.scroll_into_view_if_needed()
        heading = reopened.locator("summary > b", has_text=re.compile(rf"^{title}$"))
        return view.locator(":scope > details").filter(has=heading)

    expect(section(static[1], "Run").locator("summary")).to_contain_text("does not match")
    expect(section(static[2], "Run").locator("summary")).to_contain_text("matches the reference")
    diff = cells[2].locator(".jp-OutputArea-output .pallaslab-diff").first
    expect(diff).to_contain_text("check")
    expect(diff).to_contain_text("differs")
    tuned = (
        cells[3].locator(".jp-OutputArea-output .pallaslab-static").filter(has_text="XLA baseline")
    )
    expect(tuned).to_contain_text("BM=32, BN=64")
    expect(tuned.locator("img[alt='benchmark plot']")).to_have_count(1)
    ir = section(static[5], "IR")
    ir.locator("summary").click()
    expect(ir).to_contain_text(".target sm_90")
    screenshot(reopened, "newcomer-6-reopened")


def test_the_session_logged_no_error_or_deprecation(session):
    errors = session.page.errors
    assert errors.ours() == [], errors.ours()
    # anywidget logs "Direct export of a 'render' ..." for every widget of a module
    # that exports render by name.
    assert not [m for m in session.console if "Direct export" in m], session.console
