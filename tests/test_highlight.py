"""One grammar file for every front end: Python's tokenizer agrees with TypeScript's."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from pallaslab._src.views import highlight

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = json.loads(
    (ROOT / "labextension" / "src" / "__tests__" / "tokens.json").read_text(encoding="utf-8")
)


def test_the_lab_extension_reads_the_same_file():
    link = ROOT / "labextension" / "src" / "grammars.json"
    assert link.resolve() == highlight.GRAMMAR_FILE.resolve()


def test_every_language_has_expected_tokens():
    assert sorted(c["language"] for c in EXPECTED["cases"]) == sorted(highlight.languages())
    # The IR languages the inspector shows (llo and hlo included) and the source views'.
    assert {"python", "jaxpr", "mlir", "llvm", "ptx", "sass", "llo", "hlo"} <= set(
        highlight.languages()
    )


@pytest.mark.parametrize("case", EXPECTED["cases"], ids=lambda c: c["language"])
def test_tokens_agree_with_typescript(case):
    found = highlight.tokenize_lines(case["lines"], case["language"])
    assert [[[c or None, t] for c, t in line] for line in found] == case["tokens"]


def test_patterns_compile_alike_in_python():
    # No pattern may need a feature only one of the two engines has (variable-width
    # look-behind, nested sets): Python compiles each one without a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = [
            re.compile(rule["pattern"], re.ASCII)
            for name in highlight.languages()
            for rule in highlight.grammar_file()["languages"][name]["rules"]
        ]
    # A rule that matches nothing at all would stall a tokenizer on every line.
    assert compiled and not [p.pattern for p in compiled if p.fullmatch("")]


def test_tokens_of_a_jaxpr_line():
    assert highlight.tokenize("  c:f32[8] = add a b", "jaxpr") == [
        ("", "  c"),
        ("punctuation", ":"),
        ("type", "f32[8]"),
        ("", " "),
        ("operator", "="),
        ("", " "),
        ("op", "add"),
        ("", " a b"),
    ]
    assert "&lt;" in highlight.highlight_html("x = '<b>'", "python")


def test_aliases_and_unknown_languages():
    assert highlight.grammar_for("ttgir").name == "mlir"
    assert highlight.grammar_for("llir").name == "llvm"
    assert highlight.tokenize("<b>x</b>", "cobol") == [("", "<b>x</b>")]


def test_no_text_is_ever_lost():
    hostile = ["\x00\xff\u2028 /* x", "x" * 5000, "/* open", "loc(loc(loc("]
    for name in highlight.languages():
        for line in hostile:
            assert "".join(t for _, t in highlight.tokenize(line, name)) == line


def test_block_comments_span_lines():
    first, second = highlight.tokenize_lines(["/* a", "b */ add.f32 %f1;"], "ptx")
    assert first == [("comment", "/* a")]
    assert second[0] == ("comment", "b */")
