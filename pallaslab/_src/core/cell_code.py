"""A cell's code: compiled as the cell shows it, and the call on its magic line evaluated.

Failures on the way stop the cell as a `CellFailedError` carrying their diagnosis.
"""

from __future__ import annotations

import ast
import types
from collections.abc import Callable, Iterable
from typing import Any

from pallaslab._src.core.diagnose import Diagnosis, diagnose
from pallaslab._src.records import SourceLocation

# The magic line is line 1 of the cell; the body starts on line 2.
MAGIC_LINE = 1


class CellFailedError(Exception):
    """Stops a cell's flow with a diagnosis (the magic and tuning turn it into a message)."""

    def __init__(self, diagnosis: Diagnosis, error: BaseException | None) -> None:
        super().__init__(diagnosis.summary)
        self.diagnosis = diagnosis
        self.error = error


class CellError(Exception):
    """A cell could not be run as asked; `diagnosis` says why and where."""

    def __init__(self, diagnosis: Diagnosis, error: BaseException | None = None) -> None:
        super().__init__(diagnosis.message())
        self.diagnosis = diagnosis
        self.error = error


def failure_maker(
    name_source: Callable[[str], str | None], namespace: Iterable[str]
) -> Callable[..., CellFailedError]:
    """`fail(error, fallback=None)`: the failure that stops a cell, `error` diagnosed."""

    def fail(error: BaseException, fallback: SourceLocation | None = None) -> CellFailedError:
        return CellFailedError(diagnose(error, name_source, namespace, fallback), error)

    return fail


def usage_failure(summary: str, location: SourceLocation, label: str) -> CellFailedError:
    """A mistake on the magic line, found by pallaslab itself."""
    return CellFailedError(Diagnosis("usage", summary, location=location, label=label), None)


def compile_body(
    body: str, filename: str, fail: Callable[..., CellFailedError]
) -> tuple[Any, Any | None]:
    """Compiles the body; the last expression separately, so its value can be shown."""
    # One leading line stands for the magic line, so line numbers match the cell's.
    source = "\n" + body
    try:
        tree = ast.parse(source, filename, "exec")
    except SyntaxError as error:
        raise fail(error) from None
    last_expr = None
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr):
        tree.body.pop()
        last_expr = compile(ast.Expression(last.value), filename, "eval")
    return compile(tree, filename, "exec"), last_expr


# Argument expressions short and plain enough to name an argument by (`x`, `p.w`).
_NAME_LIKE = (ast.Name, ast.Attribute, ast.Subscript)
_MAX_NAME = 24


def call_argument_names(call: str) -> tuple[str | None, ...]:
    """How a written call names its positional arguments: `f(x, 2 * y)` -> (x, None).

    Only plain names, attributes and subscripts count; after a `*rest` the positions
    are unknown, so nothing more is named.
    """
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return ()
    if not isinstance(node, ast.Call):
        return ()
    names: list[str | None] = []
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            break
        text = ast.unparse(arg) if isinstance(arg, _NAME_LIKE) else ""
        names.append(text if text and len(text) <= _MAX_NAME else None)
    return tuple(names)


def evaluate_call(
    call: str,
    namespace: dict[str, Any],
    magic_line: SourceLocation,
    fail: Callable[..., CellFailedError],
    label: str = "",
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Evaluates `f(a, b, k=c)` from the magic line into (f, args, kwargs)."""
    try:
        node = ast.parse(call.strip(), "<magic line>", "eval").body
    except SyntaxError as error:
        raise fail(
            SyntaxError(f"the call on the magic line is not Python: {error.msg}"), magic_line
        ) from None
    if not isinstance(node, ast.Call):
        raise usage_failure(
            f"'{call.strip()}' is not a call; write the call to inspect, as in %%kernel add(x, y).",
            magic_line,
            label,
        )
    collector = "__pallaslab_collect__"
    pieces = ast.Call(func=ast.Name(collector, ast.Load()), args=node.args, keywords=node.keywords)
    function = ast.Expression(node.func)
    collected = ast.Expression(pieces)
    for tree in (function, collected):
        ast.fix_missing_locations(ast.increment_lineno(tree, 0))
    scope = {**namespace, collector: lambda *a, **k: (a, k)}
    try:
        fn = eval(compile(function, magic_line.file, "eval"), scope)
        args, kwargs = eval(compile(collected, magic_line.file, "eval"), scope)
    except Exception as error:
        raise fail(error, magic_line) from None
    if not callable(fn):
        raise usage_failure(
            f"'{ast.unparse(node.func)}' is a {type(fn).__name__}, not a function to call.",
            magic_line,
            label,
        )
    return fn, args, kwargs


def names_read(code: types.CodeType) -> set[str]:
    """Every global name the code (and the functions it defines) reads or assigns."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= names_read(const)
    return found
