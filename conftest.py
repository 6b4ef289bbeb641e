"""How nbval checks the course's notebooks (`pytest notebooks --nbval-lax`).

Outputs of cells tagged `nbval-check-output` are compared with the saved ones after the
patterns in `tests/nbval-sanitize.cfg` are applied (also when pytest is run without
`--nbval-sanitize-with`). The saved outputs are those of a CPU run (kernels emulated);
on a GPU or TPU the same cells run compiled kernels, so only errors are checked there.
Here, at the root, so that `notebooks/` holds only what students see.
"""

from __future__ import annotations

import os
from pathlib import Path

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
