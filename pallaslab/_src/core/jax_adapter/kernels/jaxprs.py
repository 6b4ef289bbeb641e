"""A kernel's jaxpr as text with a source map, and the constants a jaxpr holds."""

from __future__ import annotations

import re
from typing import Any

from pallaslab._src.base import sources

_LOCATION = re.compile(r"^(?P<code>.*?)\s+# (?P<file>.+?):(?P<line>\d+):\d+(?: \(.*\))?\s*$")


def jaxpr_text(jaxpr: Any) -> tuple[str, tuple[tuple[int, str, int], ...]]:
    """Pretty-prints a (closed) jaxpr; returns its text and a source map.

    The source map has one (text line, file, source line) entry, 1-based, for each
    line of an equation JAX knows the user source of.
    """
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    try:
        # No ANSI colours (JAX turns them on in notebooks); the views colour it.
        raw = inner.pretty_print(source_info=True, name_stack=False, use_color=False)
    except TypeError:  # pragma: no cover - older signature
        return str(jaxpr), ()
    lines: list[str] = []
    source_map: list[tuple[int, str, int]] = []
    for raw_line in raw.splitlines():
        match = _LOCATION.match(raw_line)
        if match is None:
            if raw_line.strip().startswith("#"):
                continue  # a location-only line (e.g. an empty name stack)
            lines.append(raw_line.rstrip())
            continue
        lines.append(match["code"].rstrip())
        if not sources.is_internal_file(match["file"]):
            source_map.append((len(lines), match["file"], int(match["line"])))
    return "\n".join(lines), tuple(source_map)


def jaxpr_constants(closed: Any) -> list[Any]:
    """Every constant a (closed) jaxpr holds, its sub-jaxprs' (jit, loops ...) included.

    Closed-over arrays are not part of a jaxpr's text: what a program computes depends
    on them too.
    """
    found: list[Any] = list(getattr(closed, "consts", ()))
    seen: set[int] = set()

    def walk(jaxpr: Any) -> None:
        if id(jaxpr) in seen:
            return
        seen.add(id(jaxpr))
        for eqn in jaxpr.eqns:
            for value in eqn.params.values():
                for item in value if isinstance(value, (tuple, list)) else (value,):
                    inner = getattr(item, "jaxpr", None)
                    if inner is not None and hasattr(inner, "eqns"):
                        found.extend(getattr(item, "consts", ()))
                        walk(inner)
                    elif hasattr(item, "eqns"):
                        walk(item)

    walk(getattr(closed, "jaxpr", closed))
    return found
