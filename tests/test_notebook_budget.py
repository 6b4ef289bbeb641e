"""The notebooks' time budget (conftest.py at the root): a hanging notebook fails, clearly.

Runs nbval, with the root conftest.py, on a notebook whose second cell hangs, under a
budget of a few seconds: the hanging cell is interrupted and fails naming the budget,
the cells after it are not run, the first passes, and the summary prints the time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, *sources: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(notebook, path)


def _nbval(folder: Path, budget: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PALLASLAB_NOTEBOOK_BUDGET_S": budget}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "hangs.ipynb", "--nbval-lax", "--nbval-current-env",
         "-p", "no:cacheprovider", "-rs"],
        check=False,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip


@pytest.fixture
def folder(tmp_path):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "nbval-sanitize.cfg", tmp_path / "tests" / "nbval-sanitize.cfg")
    _notebook(tmp_path / "hangs.ipynb", "x = 1", "import time\ntime.sleep(600)", "y = 2")
    return tmp_path


@pytest.mark.slow
def test_a_hanging_notebook_fails_at_its_budget(folder):
    done = _nbval(folder, budget="8")
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert "1 failed, 1 passed, 1 skipped" in out, out[-3000:]
    assert (
        "hangs.ipynb ran past its time budget" in out and "over the 8 s a notebook may take" in out
    )
    assert "not run: hangs.ipynb ran past its time budget" in out  # the cell after it
    assert "notebooks (promised well under a minute each; budget 8 s): hangs" in out


@pytest.mark.slow
def test_a_notebook_within_its_budget_passes(folder):
    _notebook(folder / "hangs.ipynb", "x = 1", "import time\ntime.sleep(0.1)", "y = x + 1")
    done = _nbval(folder, budget="120")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 passed" in done.stdout
