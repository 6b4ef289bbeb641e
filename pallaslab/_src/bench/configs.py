"""The search space of a tuning run: parsed from `--tune`, enumerated, labelled."""

from __future__ import annotations

import ast
import inspect as pyinspect
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def parse_space(tokens: Sequence[str]) -> dict[str, list[Any]]:
    """`["BLOCK_M=64,128", "num_warps=4,8"]` -> `{"BLOCK_M": [64, 128], "num_warps": [4, 8]}`.

    Values are Python literals (`64`, `0.5`, `True`, `'x'`); anything else is kept as
    text.

    Raises:
        ValueError: Naming the token, when it is not `NAME=V1,V2,...`, and naming the
            empty value in one (`BM=32,,64`): a typo never drops a value silently.
    """
    space: dict[str, list[Any]] = {}
    for token in tokens:
        name, sep, values = token.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not values.strip():
            raise ValueError(f"--tune takes NAME=V1,V2,... ; got {token!r}")
        if name in space:
            raise ValueError(f"--tune names {name} twice")
        texts = [v.strip() for v in values.split(",")]
        if "" in texts:
            raise ValueError(f"--tune {token.strip()}: {_empty_value(name, texts)}")
        space[name] = [_literal(v) for v in texts]
    return space


def _empty_value(name: str, texts: list[str]) -> str:
    """Where the first empty value of `NAME=...` is, in words."""
    at = texts.index("")
    if at == 0:
        where = f"before {texts[1]}" if len(texts) > 1 and texts[1] else "first"
    elif at == len(texts) - 1:
        where = f"after {texts[at - 1]}"
    else:
        where = f"between {texts[at - 1]} and {texts[at + 1] or '...'}"
    return f"the value {where} is empty; give each value of {name} once, separated by single commas"


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def configs_of(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the values, in order (the last name varies fastest)."""
    names = list(space)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*space.values())]


def config_label(config: Mapping[str, Any]) -> str:
    """`BLOCK_M=64, BLOCK_N=128`."""
    return ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in config.items())


def check_names(build: Callable[..., Any], space: Mapping[str, Sequence[Any]]) -> None:
    """Refuses names `build` does not take, and names without values.

    Raises:
        ValueError: Naming the unknown names, or those with nothing to try.
    """
    try:
        parameters = pyinspect.signature(build).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return
    unknown = [n for n in space if n not in parameters]
    if unknown:
        takes = ", ".join(parameters) or "nothing"
        raise ValueError(f"build does not take {', '.join(unknown)}; it takes {takes}")
    empty = [n for n, values in space.items() if not list(values)]
    if empty:
        raise ValueError(f"no values to try for {', '.join(empty)}")
