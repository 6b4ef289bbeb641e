"""Assembles the widget's ES module from the plain JS files in `static/`.

The widget ships without a JavaScript build step: the files below are concatenated
in order (helpers first, `inspector.js` with its `export default` last), with the
syntax grammars injected as a constant. Each tab adds its renderer to `TABS`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from pallaslab._src.views.highlight import grammar_file

STATIC = Path(__file__).parent / "static"
# Shared helpers first; then every tab renderer in static/tabs/; the entry point last.
HELPERS = ("dom.js", "highlight.js", "code.js")
ENTRY = "inspector.js"


def module_files() -> list[str]:
    """The JS files of the widget module, in the order they are concatenated."""
    tabs = sorted(f"tabs/{p.name}" for p in (STATIC / "tabs").glob("*.js"))
    return [*HELPERS, *tabs, ENTRY]


@functools.cache
def esm() -> str:
    """The widget's JavaScript module."""
    parts = [
        "// pallaslab inspector (generated from pallaslab/_src/views/static/*.js)",
        f"const LANGUAGES = {json.dumps(_plain_rules())};",
        "const TABS = {};",
    ]
    parts += [(STATIC / name).read_text(encoding="utf-8") for name in module_files()]
    return "\n".join(parts)


@functools.cache
def css() -> str:
    """The widget's stylesheet."""
    return (STATIC / "inspector.css").read_text(encoding="utf-8")


def _plain_rules() -> dict[str, list[list[str]]]:
    """The grammar file's rules as (class, pattern) pairs, for the plain JS tokenizer."""
    return {
        name: [[rule["token"] or "", rule["pattern"]] for rule in spec["rules"] if rule["token"]]
        for name, spec in grammar_file()["languages"].items()
    }
