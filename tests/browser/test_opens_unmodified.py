"""A committed notebook, opened in JupyterLab as it is in the repository, is not modified.

Lab writes the running kernel's kernelspec and language_info into the notebook as it
opens it; a notebook saved with anything else opens with the "modified" dot on its tab.
"""

from __future__ import annotations

import shutil
import time

import pytest

from tests.browser.conftest import ROOT, screenshot
from tests.browser.lab import open_in_lab

pytestmark = pytest.mark.browser

DIRTY_TABS = """() => Array.from(document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty'))
    .map(tab => tab.textContent)"""


def test_a_course_notebook_opens_unmodified(jupyter, new_page):
    # Byte for byte, outputs and widget state included (the session's copies are cleaned).
    name = "as-committed-00_tour.ipynb"
    shutil.copy(ROOT / "notebooks" / "00_tour.ipynb", jupyter.root / name)
    page = new_page()
    open_in_lab(page, jupyter, name)  # waits until the kernel is idle
    time.sleep(2)  # the kernel's info arrives after it turns idle
    screenshot(page, "lab-opens-unmodified")
    assert page.evaluate(DIRTY_TABS) == []
