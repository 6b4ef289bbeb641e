"""Syntax highlighting with the one grammar file every front end reads.

`grammars.json` holds, per language, an ordered list of rules (token class and a
pattern in the syntax Python's `re`, with ASCII classes, and JavaScript's `RegExp`
agree on), plus the little context IRs need: a rule may apply only at the start of
a statement (`atStart`), or only right after a token of given classes (`after`);
some tokens leave the statement unstarted (`keepsStart`: labels, predicates); a
language may have comments that span lines and characters that end a statement.
The widget and the lab extension's CodeMirror languages tokenize with the same
engine in TypeScript (`labextension/src/grammar.ts`); both are checked against the
same expected tokens (`labextension/src/__tests__/tokens.json`).
"""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import re
from pathlib import Path
from typing import Any

GRAMMAR_FILE = Path(__file__).parent / "grammars.json"

_SPACE = re.compile(r"\s+", re.ASCII)


@dataclasses.dataclass(frozen=True)
class Rule:
    """One grammar rule: what it matches and where it may apply."""

    token: str | None
    pattern: re.Pattern[str]
    at_start: bool = False
    after: frozenset[str] | None = None
    keeps_start: bool = False


@dataclasses.dataclass(frozen=True)
class Grammar:
    """A language's rules, tried in order at each position."""

    name: str
    rules: tuple[Rule, ...]
    block_comment: tuple[str, str] | None = None
    statement_end: str = ""


@dataclasses.dataclass
class TokenizerState:
    """What the tokenizer carries from one token (and line) to the next."""

    in_comment: bool = False
    at_start: bool = True
    prev: str | None = None
    prev_end: int = -1

    def start_line(self) -> None:
        """Every line starts a statement."""
        self.at_start = True
        self.prev = None
        self.prev_end = -1


@functools.cache
def grammar_file() -> dict[str, Any]:
    """The grammar file's contents."""
    data: dict[str, Any] = json.loads(GRAMMAR_FILE.read_text(encoding="utf-8"))
    return data


def languages() -> list[str]:
    """The languages the grammar file knows, by name."""
    return list(grammar_file()["languages"])


@functools.cache
def grammar_for(language: str) -> Grammar | None:
    """The compiled grammar of a language or alias; None for one not in the file."""
    data = grammar_file()
    name = data["aliases"].get(language, language)
    spec = data["languages"].get(name)
    if spec is None:
        return None
    rules = tuple(
        Rule(
            token=rule["token"],
            pattern=re.compile(rule["pattern"], re.ASCII),
            at_start=bool(rule.get("atStart")),
            after=frozenset(rule["after"]) if "after" in rule else None,
            keeps_start=bool(rule.get("keepsStart")),
        )
        for rule in spec["rules"]
    )
    comment = spec.get("blockComment")
    return Grammar(
        name=name,
        rules=rules,
        block_comment=(comment[0], comment[1]) if comment else None,
        statement_end=spec.get("statementEnd", ""),
    )


def next_token(
    grammar: Grammar, line: str, pos: int, state: TokenizerState
) -> tuple[str | None, int]:
    """Reads one token of `line` at `pos`: its class (None: plain) and where it ends."""
    comment = grammar.block_comment
    if state.in_comment and comment:
        at = line.find(comment[1], pos)
        state.in_comment = at < 0
        end = len(line) if at < 0 else at + len(comment[1])
        return "comment", max(end, pos + 1)
    space = _SPACE.match(line, pos)
    if space:
        return None, space.end()
    if comment and line.startswith(comment[0], pos):
        at = line.find(comment[1], pos + len(comment[0]))
        if at < 0:
            state.in_comment = True
            return "comment", len(line)
        return "comment", at + len(comment[1])
    prev = state.prev if state.prev_end == pos else None
    for rule in grammar.rules:
        if rule.at_start and not state.at_start:
            continue
        if rule.after is not None and (prev is None or prev not in rule.after):
            continue
        match = rule.pattern.match(line, pos)
        if match is None or match.end() == pos:
            continue
        end = match.end()
        if not rule.keeps_start:
            state.at_start = False
        if grammar.statement_end and line[end - 1] in grammar.statement_end:
            state.at_start = True
        state.prev = rule.token
        state.prev_end = end
        return rule.token, end
    # Nothing matched: one plain character.
    state.at_start = line[pos] in grammar.statement_end if grammar.statement_end else False
    state.prev = None
    state.prev_end = pos + 1
    return None, pos + 1


def tokenize_line(
    grammar: Grammar, line: str, state: TokenizerState | None = None
) -> list[tuple[str, str]]:
    """Splits one line into (token class, text) pieces, neighbours of a class merged.

    "" is plain text. `state` carries block comments from the previous line.
    """
    state = state or TokenizerState()
    state.start_line()
    pieces: list[tuple[str, str]] = []
    pos = 0
    while pos < len(line):
        token, end = next_token(grammar, line, pos, state)
        cls = token or ""
        if pieces and pieces[-1][0] == cls:
            pieces[-1] = (cls, pieces[-1][1] + line[pos:end])
        else:
            pieces.append((cls, line[pos:end]))
        pos = end
    return pieces


def tokenize(line: str, language: str) -> list[tuple[str, str]]:
    """One line's tokens in a language (all plain for a language not in the file)."""
    grammar = grammar_for(language)
    if grammar is None:
        return [("", line)] if line else []
    return tokenize_line(grammar, line)


def tokenize_lines(lines: list[str], language: str) -> list[list[tuple[str, str]]]:
    """Every line's tokens, carrying comments that span lines from one to the next."""
    grammar = grammar_for(language)
    if grammar is None:
        return [[("", line)] if line else [] for line in lines]
    state = TokenizerState()
    return [tokenize_line(grammar, line, state) for line in lines]


def highlight_html(line: str, language: str) -> str:
    """One line as escaped HTML with `<span class="pl-tok-CLASS">` around tokens."""
    return "".join(
        f'<span class="pl-tok-{cls}">{html.escape(text)}</span>' if cls else html.escape(text)
        for cls, text in tokenize(line, language)
    )
