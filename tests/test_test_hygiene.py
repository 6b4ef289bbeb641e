"""Tests that can fail: every test asserts something, and no assertion hedges.

A test without an assertion passes whatever the code does; `assert a == x or a == y`
passes for either answer where one is right. Where two outcomes are both right (a JAX
version's form), a test says which by probing the feature, not with an `or`. Read from
the tests' source (no test is run here).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
# Calls that assert: pytest's, NumPy's testing helpers, and the tests' own checkers.
ASSERTING_CALLS = ("raises", "warns", "fail", "deprecated_call", "fails")
ASSERTING_PREFIXES = ("assert", "expect", "check_")


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py"))


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _asserts(function: ast.AST, functions: dict[str, ast.AST], seen: set[str]) -> bool:
    """Whether the function asserts, itself or through a helper of its module."""
    for node in ast.walk(function):
        if isinstance(node, (ast.Assert, ast.Raise)):
            return True
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in ASSERTING_CALLS or name.startswith(ASSERTING_PREFIXES):
                return True
            if name in functions and name not in seen:
                seen.add(name)
                if _asserts(functions[name], functions, seen):
                    return True
    return False


def test_every_test_asserts_something():
    silent = []
    for path in _test_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = {
            n.name: n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for name, node in functions.items():
            if name.startswith("test") and not _asserts(node, functions, {name}):
                silent.append(f"{path.relative_to(TESTS)}:{node.lineno} {name}")
    assert silent == []


def _hedge(test: ast.expr) -> str:
    """What makes an assertion's expression a hedge, or ""."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return "`or`"
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.In)
        and isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set))
        and not isinstance(test.left, ast.Constant)  # `"x" in (a, b)`: a search
    ):
        return "`in` a list of answers"
    return ""


def test_no_assertion_accepts_either_of_two_answers():
    hedges = []
    for path in _test_files():
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assert) and (kind := _hedge(node.test)):
                text = ast.get_source_segment(source, node.test) or ""
                hedges.append(f"{path.relative_to(TESTS)}:{node.lineno} {kind}: {text[:80]}")
    assert hedges == []


def test_the_checks_catch_what_they_look_for():
    def hedged(text: str) -> str:
        (statement,) = ast.parse(text).body
        assert isinstance(statement, ast.Assert)
        return _hedge(statement.test)

    assert hedged("assert a == 1 or a == 2") == "`or`"
    assert hedged("assert a in (1, 2)") == "`in` a list of answers"
    assert hedged("assert a == 1") == ""
    assert hedged('assert "x" in (a, b)') == ""
    assert hedged("assert not [n for n in ns if 'a' in n or 'b' in n]") == ""
    tree = ast.parse("def test_a():\n    f()\n\ndef test_b():\n    check_it()\n")
    functions = {n.name: n for n in tree.body}
    assert not _asserts(functions["test_a"], functions, {"test_a"})
    assert _asserts(functions["test_b"], functions, {"test_b"})
