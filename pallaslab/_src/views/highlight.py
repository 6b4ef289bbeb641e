"""Syntax highlighting from the grammars shared with the widget's JavaScript.

`static/languages.json` holds, per language, an ordered list of (token class,
regular expression) rules written in the subset of syntax Python's `re` and
JavaScript's `RegExp` agree on. The widget highlights with the same rules in JS.
"""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path

_GRAMMAR_FILE = Path(__file__).parent / "static" / "languages.json"


@functools.cache
def grammar_source() -> str:
    """The grammars' JSON text, as shipped to the widget."""
    return _GRAMMAR_FILE.read_text(encoding="utf-8")


@functools.cache
def _scanner(language: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """One alternation of all rules, tried in order at each position (as JS does)."""
    grammars = json.loads(grammar_source())
    rules = grammars.get(language, ())
    pattern = "|".join(f"(?P<r{k}>{source})" for k, (_, source) in enumerate(rules))
    return re.compile(pattern or "(?!)"), tuple(cls for cls, _ in rules)


def tokenize(line: str, language: str) -> list[tuple[str, str]]:
    """Splits one line into (token class, text) pieces; "" is plain text."""
    scanner, classes = _scanner(language)
    pieces: list[tuple[str, str]] = []
    pos = 0
    for match in scanner.finditer(line):
        if match.end() == match.start():
            continue
        if match.start() > pos:
            pieces.append(("", line[pos : match.start()]))
        cls = classes[int(str(match.lastgroup)[1:])]
        if pieces and pieces[-1][0] == cls:
            pieces[-1] = (cls, pieces[-1][1] + match.group())
        else:
            pieces.append((cls, match.group()))
        pos = match.end()
    if pos < len(line):
        pieces.append(("", line[pos:]))
    return pieces


def highlight_html(line: str, language: str) -> str:
    """One line as escaped HTML with `<span class="pl-tok-CLASS">` around tokens."""
    return "".join(
        f'<span class="pl-tok-{cls}">{html.escape(text)}</span>' if cls else html.escape(text)
        for cls, text in tokenize(line, language)
    )
