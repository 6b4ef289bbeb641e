"""Assembles the widget's ES module from the plain JS files in `static/`.

The widget ships without a JavaScript build step: the files below are concatenated
in order (helpers first, `inspector.js` with its `export default` last), with the
syntax grammars injected as a constant. Each tab adds its renderer to `TABS`.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pallaslab._src.views.highlight import grammar_source

STATIC = Path(__file__).parent / "static"
# Helpers first, then one file per tab, then the entry point.
MODULE_FILES = (
    "dom.js",
    "highlight.js",
    "code.js",
    "tabs/overview.js",
    "tabs/source.js",
    "tabs/jaxpr.js",
    "tabs/run.js",
    "inspector.js",
)


@functools.cache
def esm() -> str:
    """The widget's JavaScript module."""
    parts = [
        "// pallaslab inspector (generated from pallaslab/_src/views/static/*.js)",
        f"const LANGUAGES = {grammar_source().strip()};",
        "const TABS = {};",
    ]
    parts += [(STATIC / name).read_text(encoding="utf-8") for name in MODULE_FILES]
    return "\n".join(parts)


@functools.cache
def css() -> str:
    """The widget's stylesheet."""
    return (STATIC / "inspector.css").read_text(encoding="utf-8")
