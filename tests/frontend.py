"""The widgets' front end as Python tests read it: TypeScript sources and the build."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallaslab._src.views import bundle

WIDGET = Path(__file__).resolve().parents[1] / "labextension" / "src" / "widget"
# Ways to turn a string into markup, none of which the front end may use.
HTML_SINKS = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(")


def source(*parts: str) -> str:
    """The TypeScript of the widget (or of the files named, relative to its folder)."""
    files = [WIDGET.joinpath(*p.split("/")) for p in parts] or sorted(WIDGET.rglob("*.ts"))
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def built(name: str) -> str:
    """A built ES module of the front end; fails when it was not built."""
    if not bundle.built():
        pytest.fail(f"the widget front end is not built: {bundle.BUILD_HINT}")
    return bundle.module(name)
