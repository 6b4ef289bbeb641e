"""The course's tour in JupyterLab: run all, then use the inspector as a student would.

The notebook runs once (module-scoped page); each test then looks at one thing.
Scenarios written for the Jaxpr tab also cover the IR tab (issue 3) and the Tiles
tab (issue 4) once those exist: they are parametrized by tab and skip a tab this
branch does not have yet.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import JupyterServer, screenshot
from tests.browser.lab import (
    has_tab,
    inspector,
    open_in_lab,
    run_all,
    select_tab,
    wait_for_output,
    wait_idle,
)

pytestmark = pytest.mark.browser

KERNEL_LINE = "o_ref[...] = x_ref[...] + y_ref[...]"
# Tabs that show a derived text beside its source, linked line by line, with the line
# of the text that the kernel's add becomes.
LINKED_TEXT_TABS = [("jaxpr", "= add"), ("ir", "addf")]


@pytest.fixture(scope="module")
def tour(jupyter: JupyterServer, module_page: Any) -> SimpleNamespace:
    page = module_page
    open_in_lab(page, jupyter, "00_tour.ipynb")
    run_all(page)
    error = wait_for_output(page, "KernelError")
    found = inspector(page)
    wait_idle(page)
    screenshot(page, "lab-tour-run-all")
    return SimpleNamespace(page=page, inspector=found, error=error)


def require_tab(tour: SimpleNamespace, tab: str) -> None:
    if not has_tab(tour.inspector, tab):
        pytest.skip(f"the inspector on this branch has no {tab!r} tab yet")


def test_run_all_shows_the_inspector(tour):
    header = tour.inspector.locator(".pl-header")
    expect(header.locator(".pl-brand")).to_have_text("pallaslab")
    expect(header.locator(".pl-title")).to_contain_text("add")
    expect(header.locator(".pl-pass")).to_contain_text("matches reference")
    expect(header).to_contain_text("cpu")
    tour.inspector.scroll_into_view_if_needed()
    titles = tour.inspector.locator(".pl-tab").all_text_contents()
    assert [t for t in titles if t in {"Kernels", "Source", "Jaxpr", "Run"}] == [
        "Kernels",
        "Source",
        "Jaxpr",
        "Run",
    ]
    # The first tab (Kernels) is drawn without asking the kernel for anything.
    # Its first table is the operands' (the memory-per-chip table follows).
    table = tour.inspector.locator('.pl-body[data-tab="overview"] .pl-table').first
    expect(table).to_contain_text("x_ref")
    expect(table).to_contain_text("o_ref")
    expect(table).to_contain_text("lambda i: (i,)")


@pytest.mark.parametrize(
    ("tab", "selector", "text"),
    [
        ("source", ".pl-line", "def add_kernel(x_ref, y_ref, o_ref):"),
        ("jaxpr", ".pl-line", "= add"),
        ("run", ".pl-verdict.pl-pass", "matches the reference"),
        ("overview", ".pl-kernel h4", "add_kernel"),
    ],
)
def test_switching_tabs(tour, tab, selector, text):
    pane = select_tab(tour.inspector, tab)
    expect(tour.inspector.locator(f'.pl-tab[data-tab="{tab}"]')).to_have_attribute(
        "aria-selected", "true"
    )
    expect(pane.locator(selector, has_text=text).first).to_be_visible()
    assert tour.inspector.locator(".pl-tab.pl-selected").count() == 1


@pytest.mark.parametrize(("tab", "text_line"), LINKED_TEXT_TABS)
def test_hover_links_text_and_source_lines(tour, tab, text_line):
    require_tab(tour, tab)
    page = tour.page
    pane = select_tab(tour.inspector, tab)
    panes = pane.locator(".pl-split > .pl-pane")
    source_pane, text_pane = panes.nth(0), panes.nth(1)
    # Lazy tabs (IR) lower and fetch their text on first view: wait for linked lines.
    expect(text_pane.locator(".pl-line[data-colour]").first).to_be_visible(timeout=60_000)

    # Text -> source: the add lights up the kernel's add line.
    line = text_pane.locator(".pl-line[data-colour]", has_text=text_line).first
    line.hover()
    active_source = source_pane.locator(".pl-line.pl-active")
    expect(active_source).to_have_count(1)
    expect(active_source).to_contain_text(KERNEL_LINE)
    # Linked lines share their colour.
    assert line.get_attribute("data-colour") == active_source.get_attribute("data-colour")

    # Source -> text: the kernel's add line lights up every text line it became.
    source_pane.locator(".pl-line", has_text=KERNEL_LINE).first.hover()
    active_text = text_pane.locator(".pl-line.pl-active")
    expect(active_text.first).to_be_visible()
    assert any(text_line in t for t in active_text.all_inner_texts())

    page.mouse.move(2, 2)
    expect(pane.locator(".pl-line.pl-active")).to_have_count(0)
    screenshot(page, f"lab-tour-{tab}-linked")


@pytest.mark.parametrize(("tab", "text_line"), LINKED_TEXT_TABS)
def test_open_text_in_a_new_tab(tour, tab, text_line):
    require_tab(tour, tab)
    page = tour.page
    pane = select_tab(tour.inspector, tab)
    pane.locator(".pl-open-text").click()
    view = page.locator(".pl-lab-textview").last
    expect(view).to_be_visible()

    # A main-area tab beside the notebook (split to the right), both in view.
    title = view.locator(".pl-lab-textview-title").inner_text()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=title)).to_be_visible()
    notebook_box = page.locator(".jp-NotebookPanel").first.bounding_box()
    view_box = view.bounding_box()
    assert view_box["x"] >= notebook_box["x"] + notebook_box["width"] - 2

    # Highlighted by the extension's grammar (stable tok-* classes beside the theme's).
    content = view.locator(".cm-content")
    expect(content).to_contain_text(text_line)
    expect(content.locator(".tok-keyword").first).to_be_visible()
    assert content.locator(".tok-typeName").count() > 0
    assert content.locator(".cm-line[data-pl-colour]").count() > 0

    # Text -> notebook cell: hovering the add lights up the kernel line in its cell.
    view.locator(".cm-line", has_text=text_line).first.hover()
    expect(view.locator(".cm-line.pl-lab-active").first).to_be_visible()
    # Named as the cell's prompt names it.
    kernel_cell = page.locator(
        ".jp-NotebookPanel .jp-CodeCell", has_text="%%kernel add(x, y)"
    ).first
    prompt = re.search(r"\[(\d+)\]", kernel_cell.locator(".jp-InputPrompt").inner_text()).group(1)
    expect(view.locator(".pl-lab-textview-status")).to_contain_text(f"Cell [{prompt}] line 6")
    cell_line = page.locator(".jp-NotebookPanel .jp-Cell .cm-line.pl-lab-cell-linked")
    expect(cell_line).to_have_count(1)
    expect(cell_line).to_contain_text(KERNEL_LINE)
    screenshot(page, f"lab-tour-{tab}-new-tab")

    # Notebook cell -> text: hovering the kernel line lights up its lines in the tab.
    page.mouse.move(2, 2)
    expect(view.locator(".cm-line.pl-lab-active")).to_have_count(0)
    notebook_line = page.locator(".jp-NotebookPanel .jp-Cell .cm-line", has_text=KERNEL_LINE).first
    notebook_line.scroll_into_view_if_needed()
    notebook_line.hover()
    expect(view.locator(".cm-line.pl-lab-active").first).to_be_visible()
    assert any(text_line in t for t in view.locator(".cm-line.pl-lab-active").all_inner_texts())

    # Read-only: typing changes nothing.
    before = content.inner_text()
    view.locator(".cm-line").first.click()
    page.keyboard.type("xyz")
    assert content.inner_text() == before


def test_scrub_the_tile_grid_moves_the_highlighted_blocks(tour):
    # Scrubbing the program moves the lit block in every operand: the operand
    # canvases say which element ranges they light (data-block), the tab root which
    # program it shows (data-program) and how many blocks are lit (data-highlighted).
    require_tab(tour, "tiles")
    pane = select_tab(tour.inspector, "tiles")
    scrubber = pane.locator('input[data-role="scrub"]')
    canvases = pane.locator("canvas[data-operand]")
    expect(canvases.first).to_be_visible()
    root = pane.locator("[data-highlighted]").first

    def lit_blocks() -> list[str]:
        return canvases.evaluate_all("nodes => nodes.map(n => n.dataset.block || '')")

    scrubber.fill("0")
    expect(root).to_have_attribute("data-program", "0")
    first = lit_blocks()
    assert all(first), f"a block of each operand is lit for program 0: {first}"
    # Three operands (x, y, o) each light their block of program 0: elements 0..127.
    assert int(root.get_attribute("data-highlighted")) == 3
    assert first == ["0:128"] * 3
    scrubber.fill("5")
    expect(root).to_have_attribute("data-program", "5")
    moved = lit_blocks()
    assert moved == ["640:768"] * 3, moved
    screenshot(tour.page, "lab-tour-tiles-scrubbed")


def test_an_error_cell_names_its_line(tour):
    # text_content, not inner_text: JupyterLab does not render cells scrolled out of
    # view, and earlier scenarios scroll.
    text = tour.error.text_content()
    assert re.search(
        r"Cell line 3: Python .if. .*on a value that is only known when the kernel runs", text
    ), text
    assert "Traceback" not in text  # one message, not a traceback


def test_no_uncaught_page_errors(tour):
    assert tour.page.errors.uncaught == []
    assert tour.page.errors.ours() == []
    assert tour.page.errors.about("pallaslab") == []
