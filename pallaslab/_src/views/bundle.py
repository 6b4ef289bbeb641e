"""The widgets' front end: ES modules and stylesheets built from TypeScript.

The inspector and the benchmark view are written in TypeScript under
`labextension/src/widget/` (linted, type-checked and unit-tested with the lab
extension) and built by `jlpm build:prod` (so by `scripts/test`, `scripts/lab` and
the wheel's build) into `frontend/` here, a build artifact that wheels ship. Without
a build, the widget area says how to make one; the static HTML needs none.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

FRONTEND = Path(__file__).parent / "frontend"

#: How to build the front end, from a checkout.
BUILD_HINT = "cd labextension && jlpm install && jlpm build:prod (or run ./scripts/test)"


def _missing_module(name: str) -> str:
    """A module that says, in the widget area, that the front end is not built."""
    message = (
        f"pallaslab's widget front end is not built ({FRONTEND.name}/{name}.js is "
        f"missing): {BUILD_HINT}. The saved view below the cell still shows everything."
    )
    return (
        "export default { render({ el }) { const p = document.createElement('p');"
        " p.className = 'pl-problem'; p.style.cssText = 'border-left:4px solid #cf222e;"
        "padding:4px 8px'; p.textContent = "
        f"{json.dumps(message)}; el.appendChild(p); }} }};\n"
    )


@functools.cache
def module(name: str) -> str:
    """The built ES module `name` ("inspector", "bench"), or one saying it is missing."""
    path = FRONTEND / f"{name}.js"
    if not path.is_file():
        return _missing_module(name)
    return path.read_text(encoding="utf-8")


@functools.cache
def stylesheet(name: str) -> str:
    """The built stylesheet `name` ("" when the front end is not built)."""
    path = FRONTEND / f"{name}.css"
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def built() -> bool:
    """Whether the front end is built."""
    return all((FRONTEND / f"{n}.js").is_file() for n in ("inspector", "bench"))


def esm() -> str:
    """The inspector's ES module."""
    return module("inspector")


def css() -> str:
    """The inspector's stylesheet."""
    return stylesheet("inspector")
