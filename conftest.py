"""How nbval checks the course's notebooks (`pytest notebooks --nbval-lax`).

Outputs of cells tagged `nbval-check-output` are compared with the saved ones after the
patterns in `tests/nbval-sanitize.cfg` are applied (also when pytest is run without
`--nbval-sanitize-with`). The saved outputs are those of a CPU run (kernels emulated);
on a GPU or TPU the same cells run compiled kernels, so only errors are checked there.
Here, at the root, so that `notebooks/` holds only what students see.

Each notebook also has a time budget (see `NOTEBOOK_BUDGET_S`): a notebook that hangs or
runs far longer than the README promises fails with one clear message, and the terminal
summary prints every notebook's time.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

SANITIZE = Path(__file__).parent / "tests" / "nbval-sanitize.cfg"


def pytest_configure(config: pytest.Config) -> None:
    """Sanitizes with tests/nbval-sanitize.cfg unless told otherwise."""
    option = config.option
    if getattr(option, "nbval_sanitize_with", None) is None and hasattr(
        option, "nbval_sanitize_with"
    ):
        option.nbval_sanitize_with = str(SANITIZE)


def _accelerator() -> str | None:
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if platforms and set(platforms.split(",")) <= {"cpu"}:
        return None
    import jax  # noqa: PLC0415 - only when a notebook may run on an accelerator

    try:
        backend = jax.default_backend()
    except Exception:  # no backend at all: the notebooks' own cells will say so
        return None
    return None if backend == "cpu" else backend


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a GPU or TPU, saved outputs (a CPU run's) are not compared."""
    notebook_cells = [item for item in items if type(item).__name__ == "IPyNbCell"]
    if not notebook_cells or _accelerator() is None:
        return
    for item in notebook_cells:
        item.options["check"] = False  # type: ignore[attr-defined]


# The README promises that every notebook runs top to bottom in well under a minute on a
# laptop's CPU. Measured on a 2-core machine loaded by other work (load average 5),
# the slowest, 06_flash_attention, took 36 s and the others 2 to 12 s. A notebook gets
# four minutes from its first cell: a hang, or a notebook several times slower than
# promised, fails with one message naming the budget; a loaded CI machine, many times
# faster than that, does not. Each cell's nbval timeout is the budget left (or nbval's
# own `--nbval-cell-timeout`, when smaller), so a hanging cell is interrupted when the
# budget runs out rather than after nbval's default 2000 s. The time spent starting
# the kernel is not counted (nbval's `--nbval-kernel-startup-timeout` bounds it).
# PALLASLAB_NOTEBOOK_BUDGET_S sets another budget (a slow machine, a first GPU compile).
NOTEBOOK_BUDGET_S = float(os.environ.get("PALLASLAB_NOTEBOOK_BUDGET_S", "240"))


@dataclasses.dataclass
class _NotebookClock:
    """One notebook's time: since its first cell, and why it stopped, if it did."""

    started: float
    elapsed: float = 0.0
    stopped: str = ""


_CLOCKS: dict[str, _NotebookClock] = {}


def _is_notebook_cell(item: pytest.Item) -> bool:
    return type(item).__name__ == "IPyNbCell"


def _over_budget(item: Any, elapsed: float, budget: float) -> str:
    name = Path(str(item.parent.fspath)).name
    return (
        f"{name} ran past its time budget: {elapsed:.0f} s at cell {item.cell_num}, over the "
        f"{budget:.0f} s a notebook may take (the README promises well under a minute on a "
        "laptop's CPU; conftest.py explains the budget; PALLASLAB_NOTEBOOK_BUDGET_S sets it)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Runs a notebook cell within what is left of its notebook's time budget."""
    if not _is_notebook_cell(item):
        return (yield)
    from nbval.plugin import NbCellError  # noqa: PLC0415 - only with nbval's cells

    cell: Any = item
    clock = _CLOCKS.setdefault(cell.parent.nodeid, _NotebookClock(time.monotonic()))
    if clock.stopped:
        pytest.skip(f"not run: {clock.stopped}")
    budget = NOTEBOOK_BUDGET_S
    remaining = budget - (time.monotonic() - clock.started)
    if remaining <= 0:
        clock.stopped = _over_budget(cell, time.monotonic() - clock.started, budget)
        raise NbCellError(cell.cell_num, clock.stopped, cell.cell.source)
    option = item.config.option
    nbval_timeout = float(option.nbval_cell_timeout)
    option.nbval_cell_timeout = min(nbval_timeout, remaining)
    try:
        return (yield)
    except NbCellError as error:
        # nbval interrupted the cell at the timeout it was given: when that was the
        # budget's, say so instead of "Timeout of 183.2 seconds exceeded".
        if cell.parent.timed_out and remaining < nbval_timeout:
            clock.stopped = _over_budget(cell, time.monotonic() - clock.started, budget)
            raise NbCellError(cell.cell_num, clock.stopped, cell.cell.source) from error
        raise
    finally:
        option.nbval_cell_timeout = nbval_timeout
        clock.elapsed = time.monotonic() - clock.started


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Each notebook's time, beside the README's promise and the budget."""
    if not _CLOCKS:
        return
    times = ", ".join(
        f"{Path(nodeid).stem} {clock.elapsed:.1f} s" for nodeid, clock in _CLOCKS.items()
    )
    terminalreporter.write_line(
        f"notebooks (promised well under a minute each; budget {NOTEBOOK_BUDGET_S:.0f} s): {times}"
    )
