"""Command-line parsing that says "did you mean" for a misspelt option or command.

argparse answers `--taget ptx:sm_90` with "unrecognized arguments" and `lowr` with a
list of every command; `SuggestingParser` adds the nearest known option or command,
from every subcommand's options (the parser that reports the error is the root's).
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Sequence
from typing import Any, NoReturn

_UNRECOGNIZED = re.compile(r"unrecognized arguments: (?P<args>.+)")
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<choice>[^']*)'")


def did_you_mean(message: str, options: Sequence[str], commands: Sequence[str] = ()) -> str:
    """The nearest option or command to one an argparse error message says is unknown.

    As "; did you mean --target?"; "" when the message names neither, or nothing known
    is near.
    """
    found = _UNRECOGNIZED.search(message)
    if found:
        tried = [t.split("=", 1)[0] for t in found["args"].split() if t.startswith("-")]
        close = [
            match[0]
            for word in tried
            if (match := difflib.get_close_matches(word, list(options), n=1, cutoff=0.6))
        ]
        return f"; did you mean {' or '.join(dict.fromkeys(close))}?" if close else ""
    found = _INVALID_CHOICE.search(message)
    if found and commands:
        close = difflib.get_close_matches(found["choice"], list(commands), n=1, cutoff=0.6)
        return f"; did you mean '{close[0]}'?" if close else ""
    return ""


class SuggestingParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors name the nearest option or command."""

    def error(self, message: str) -> NoReturn:
        commands = [c for p in self._subparsers_actions() for c in p.choices]
        super().error(message + did_you_mean(message, self._every_option(), commands))

    # argparse keeps its actions private; reading them is how a parser can list them.
    def _subparsers_actions(self) -> list[Any]:
        subparsers = argparse._SubParsersAction  # noqa: SLF001
        return [a for a in self._actions if isinstance(a, subparsers)]

    def _every_option(self) -> list[str]:
        options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        for action in self._subparsers_actions():
            for parser in action.choices.values():
                options += [o for a in parser._actions for o in a.option_strings]  # noqa: SLF001
        return [o for o in dict.fromkeys(options) if o.startswith("--")]
