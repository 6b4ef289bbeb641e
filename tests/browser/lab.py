"""Driving JupyterLab and Notebook 7 pages: open, run, find the inspector.

Selectors are JupyterLab's and Lumino's public DOM (menus carry `data-command`) and
the inspector's own classes (`views/static/*.js`).
"""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import KERNEL_TIMEOUT_MS, JupyterServer, screenshot

INSPECTOR = ".jp-OutputArea-output .pallaslab"


def open_in_lab(page: Any, server: JupyterServer, path: str) -> None:
    """Opens a notebook in JupyterLab (alone: `reset` drops the saved workspace)."""
    page.goto(server.url(f"lab/tree/{path}?reset"))
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
    wait_idle(page)


def open_in_notebook7(page: Any, server: JupyterServer, path: str) -> None:
    """Opens a notebook in Notebook 7 (the classic one-document page)."""
    page.goto(server.url(f"notebooks/{path}"))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    wait_idle(page)


def wait_idle(page: Any, timeout: int = KERNEL_TIMEOUT_MS) -> None:
    """Waits until the kernel is idle (the toolbar's execution indicator says so)."""
    page.wait_for_selector(
        '.jp-Notebook-ExecutionIndicator[data-status="idle"]', state="attached", timeout=timeout
    )


def menu(page: Any, label: str, *commands: str) -> None:
    """Runs a command from the menu bar (JupyterLab and Notebook 7 share Lumino menus).

    Several command ids may be given: the first the menu has is used.
    """
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(label)}$")).click()
    items = ", ".join(f'.lm-Menu-item[data-command="{c}"]' for c in commands)
    page.locator(items).first.click()


def save(page: Any) -> None:
    """File > Save of the notebook on the page."""
    page.locator(".jp-NotebookPanel .jp-InputPrompt").first.click()
    menu(page, "File", "docmanager:save")


def run_all(page: Any) -> None:
    """Run > Run All Cells, checking that the cells did start."""
    started = """() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-InputPrompt'))
        .some(p => /\\[[*0-9]/.test(p.textContent))"""
    for attempt in range(3):
        # The menu acts on the current widget: make sure it is the notebook.
        page.locator(".jp-NotebookPanel .jp-InputPrompt").first.click()
        menu(page, "Run", "runmenu:run-all", "notebook:run-all-cells")
        try:
            page.wait_for_function(started, timeout=15_000)
            return
        except Exception:
            if attempt == 2:
                screenshot(page, "run-all-did-not-start")
                raise


def wait_for_output(page: Any, text: str, timeout: int = KERNEL_TIMEOUT_MS) -> Any:
    """Waits for a cell output containing `text`; returns its locator."""
    output = page.locator(".jp-OutputArea-output", has_text=text).first
    try:
        output.wait_for(timeout=timeout)
    except Exception:
        screenshot(page, "no-output")
        raise
    return output


def inspector(page: Any, index: int = 0, timeout: int = KERNEL_TIMEOUT_MS) -> Any:
    """The `index`-th inspector on the page, once drawn."""
    found = page.locator(INSPECTOR).nth(index)
    try:
        found.locator(".pl-header").wait_for(timeout=timeout)
    except Exception:
        screenshot(page, "no-inspector")
        raise
    # JupyterLab does not render cells scrolled out of view (Run All ends at the last
    # cell): bring the inspector back before anything reads it.
    found.scroll_into_view_if_needed()
    return found


def select_tab(inspector_: Any, tab_id: str, timeout: int = KERNEL_TIMEOUT_MS) -> Any:
    """Clicks an inspector tab and waits for its pane to be drawn (lazy tabs come from Python)."""
    inspector_.scroll_into_view_if_needed()
    inspector_.locator(f'.pl-tab[data-tab="{tab_id}"]').click()
    pane = inspector_.locator(f'.pl-body[data-tab="{tab_id}"]')
    pane.wait_for()
    pane.locator(":scope > :not(.pl-loading)").first.wait_for(timeout=timeout)
    return pane


def has_tab(inspector_: Any, tab_id: str) -> bool:
    """Whether the inspector has a tab (the IR and Tiles tabs arrive with their issues)."""
    return inspector_.locator(f'.pl-tab[data-tab="{tab_id}"]').count() > 0


def no_injected_markup(page: Any) -> dict[str, Any]:
    """What an injected `<img onerror>` or `<script>` would have left behind."""
    return page.evaluate(
        """() => ({
            pwned: window.__pwned === undefined ? null : window.__pwned,
            images: document.querySelectorAll('img[src="x"]').length,
            scripts: Array.from(document.querySelectorAll('script'))
                .filter(s => s.textContent.includes('__pwned')).length,
        })"""
    )


def notebook_cell(page: Any, index: int) -> Any:
    """The `index`-th cell of the notebook on the page."""
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)


def run_cell(page: Any, index: int, timeout: int = KERNEL_TIMEOUT_MS) -> Any:
    """Runs one cell (select it, Shift-Enter), as a user steps through a notebook.

    Waits until the cell's prompt shows its execution count and the kernel is idle;
    returns the cell's locator.
    """
    cell = notebook_cell(page, index)
    prompt = cell.locator(".jp-InputArea-prompt").first
    before = prompt.text_content() or ""
    # The prompt reads "[*]" once the run started and "[n]" once it ended; a cell run
    # before must show a prompt other than its old one.
    shows = """([cell, pattern, before]) => {
        const text = cell.querySelector('.jp-InputArea-prompt')?.textContent ?? '';
        return text !== before && new RegExp(pattern).test(text);
    }"""
    for attempt in range(3):
        cell.scroll_into_view_if_needed()
        cell.locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Shift+Enter")
        # JupyterLab drops a run asked for while the notebook's kernel is still being
        # started (the prompt stays as it was): only a dropped run is asked for again.
        try:
            page.wait_for_function(
                shows, arg=[cell.element_handle(), r"\[[*\d]+\]", before], timeout=20_000
            )
            break
        except Exception:
            if attempt == 2:
                screenshot(page, f"cell-{index}-did-not-start")
                raise
    try:
        page.wait_for_function(
            shows, arg=[cell.element_handle(), r"\[\d+\]", before], timeout=timeout
        )
        wait_idle(page, timeout)
    except Exception:
        screenshot(page, f"cell-{index}-did-not-finish")
        raise
    assert prompt.count() == 1
    return cell


def cell_number(cell: Any) -> int:
    """The execution count in a cell's prompt ("[3]:" -> 3)."""
    found = re.search(r"\[(\d+)\]", cell.locator(".jp-InputArea-prompt").first.inner_text())
    assert found, "the cell has not run"
    return int(found.group(1))
