import pytest
pytestmark = pytest.mark.browser
from tests.browser.conftest import screenshot

def test_scratch(jupyter, new_page):
    page = new_page()
    page.goto(jupyter.url("lab/tree/00_tour.ipynb"))
    page.wait_for_selector(".jp-Notebook", timeout=120_000)
    page.wait_for_timeout(5000)
    print("flag", page.evaluate("window.__pallaslabLab"))
    print(page.evaluate("Array.from(document.querySelectorAll('.lm-MenuBar-itemLabel')).map(e => e.textContent)"))
    print(page.evaluate("Array.from(document.querySelectorAll('[data-status]')).map(e => e.className + ' ' + e.dataset.status)"))
    screenshot(page, "scratch")
    print(page.errors.uncaught, page.errors.console)
