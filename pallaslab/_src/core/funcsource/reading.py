"""Reading a function's source back: its `def` or lambda text, checked against the code that ran.

Also what the source reads: the globals its code loads, and the names its decorators
and defaults read when it is defined.
"""

from __future__ import annotations
import __future__

import ast
import dis
import functools
import inspect
import linecache
import textwrap
import types
from typing import Any

from pallaslab._src.base import sources


class NotWritableError(Exception):
    """A value that cannot be written as source (the message says why)."""


def function_source(fn: types.FunctionType) -> str:
    """The source of a function: a dedented `def` (with decorators), or a lambda's text.

    Raises:
        NotWritableError: When the source is not available.
    """
    code = fn.__code__
    text = "".join(linecache.getlines(code.co_filename))
    if not text:
        raise NotWritableError(
            f"the source of {fn.__qualname__} ({code.co_filename}) is not available"
        )
    if fn.__name__ == "<lambda>":
        return _lambda_source(fn, text)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as error:
        raise NotWritableError(
            f"the source of {fn.__qualname__} is not available ({error})"
        ) from None
    if not _compiles_to(without_decorators(source), code):
        raise NotWritableError(
            f"the source of {fn.__qualname__} in {code.co_filename} is not the code that "
            "ran (was the file edited since it was imported?)"
        )
    return source


def _compiles_to(def_source: str, code: types.CodeType) -> bool:
    """Whether `def_source` compiles to `code` (in a function giving its free variables)."""
    free = ", ".join(code.co_freevars)
    wrapped = f"def _outer({free}):\n{textwrap.indent(def_source, '    ')}"
    flags = code.co_flags & _FUTURE_FLAGS
    try:
        outer = compile(wrapped, code.co_filename, "exec", flags=flags, dont_inherit=True)
    except SyntaxError:
        return False
    factory = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    inner = [c for c in factory.co_consts if isinstance(c, types.CodeType)]
    return any(c.co_name == code.co_name and _code_equal(c, code) for c in inner)


_FUTURE_FLAGS = functools.reduce(
    lambda flags, name: flags | getattr(__future__, name).compiler_flag,
    __future__.all_feature_names,
    0,
)


def _lambda_source(fn: types.FunctionType, text: str) -> str:
    """The text of the lambda expression that made `fn` (matched by its bytecode)."""
    code = fn.__code__
    tree = _parse_cell(text)
    if tree is None:
        raise NotWritableError(f"{code.co_filename} is not valid Python")
    candidates = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno
    ]
    for node in candidates:
        segment = ast.get_source_segment(text, node)
        if segment is None:
            continue
        segment = " ".join(line.strip() for line in segment.splitlines())
        if len(candidates) == 1 or _same_code(segment, code):
            return segment
    raise NotWritableError(
        f"the lambda at {sources.location(code.co_filename, code.co_firstlineno)} could not "
        "be told apart "
        "from the others on its line"
    )


def _parse_cell(text: str) -> ast.Module | None:
    """Python's structure of a file or notebook cell (magic lines read as blank)."""
    try:
        return ast.parse(text)
    except SyntaxError:
        pass
    lines = text.splitlines(keepends=True)
    blanked = "".join("\n" if line.lstrip().startswith(("%", "!")) else line for line in lines)
    try:
        return ast.parse(blanked)
    except SyntaxError:
        return None


def _same_code(lambda_text: str, code: types.CodeType) -> bool:
    try:
        compiled = compile(f"({lambda_text})", "<lambda>", "eval")
    except SyntaxError:
        return False
    inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
    return inner is not None and _code_equal(inner, code)


def _code_equal(a: types.CodeType, b: types.CodeType) -> bool:
    """Whether two code objects do the same thing.

    Compared instruction by instruction, with what varies by context set aside: the
    compiler calls `module.f()` with LOAD_ATTR where `module` was imported in the
    same file and with LOAD_METHOD elsewhere, and jump offsets follow.
    """
    if (a.co_names, a.co_varnames, a.co_freevars, a.co_argcount, a.co_kwonlyargcount) != (
        b.co_names,
        b.co_varnames,
        b.co_freevars,
        b.co_argcount,
        b.co_kwonlyargcount,
    ):
        return False
    consts_a = [c for c in a.co_consts if not isinstance(c, types.CodeType)]
    consts_b = [c for c in b.co_consts if not isinstance(c, types.CodeType)]
    nested_a = [c for c in a.co_consts if isinstance(c, types.CodeType)]
    nested_b = [c for c in b.co_consts if isinstance(c, types.CodeType)]
    return (
        _same_values(consts_a, consts_b)
        and _instructions(a) == _instructions(b)
        and len(nested_a) == len(nested_b)
        and all(_code_equal(x, y) for x, y in zip(nested_a, nested_b, strict=True))
    )


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def _instructions(code: types.CodeType) -> list[tuple[str, Any]]:
    found = []
    for instruction in dis.get_instructions(code):
        name = instruction.opname
        # PUSH_NULL is call bookkeeping that varies with the compile context, as
        # LOAD_METHOD does: `mod.f(...)(...)` pushes it where `mod` is imported alike.
        if name in ("CACHE", "NOP", "EXTENDED_ARG", "PUSH_NULL"):
            continue
        if name == "LOAD_METHOD":
            name = "LOAD_ATTR"
        argument = instruction.argval
        if instruction.opcode in _JUMPS or isinstance(argument, types.CodeType):
            argument = None
        found.append((name, argument if _hashable(argument) else repr(argument)))
    return found


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _same_values(a: list[Any], b: list[Any]) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def global_names(code: types.CodeType) -> list[str]:
    """Names the code (and code nested in it) reads as globals, in first-use order."""
    found: dict[str, None] = {}

    def walk(c: types.CodeType) -> None:
        for instruction in dis.get_instructions(c):
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL"):
                found.setdefault(str(instruction.argval))
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    walk(code)
    return list(found)


def definition_names(source: str) -> list[str]:
    """Names a `def`'s decorators and default values read (evaluated at definition)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    parts: list[ast.AST] = [*node.decorator_list, *node.args.defaults]
    parts += [d for d in node.args.kw_defaults if d is not None]
    names: dict[str, None] = {}
    for part in parts:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                names.setdefault(sub.id)
    return list(names)


def without_decorators(source: str) -> str:
    """A `def` without the decorator lines above it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.decorator_list:
        return source
    return "".join(source.splitlines(keepends=True)[node.lineno - 1 :])


def decorated(fn: types.FunctionType) -> bool:
    try:
        return function_source(fn).lstrip().startswith("@")
    except NotWritableError:
        return False
