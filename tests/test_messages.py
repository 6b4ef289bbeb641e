"""One clipping rule for every message shown: the magic, the banner, the CLI."""

from __future__ import annotations

import pytest

from pallaslab._src.base import messages
from pallaslab._src.core.diagnose import Diagnosis
from pallaslab._src.views.header import Problem


class BrokenStrError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_short_text_is_left_alone():
    assert messages.clip("a\nb") == "a\nb"


def test_a_long_line_is_cut_saying_how_much():
    text = messages.clip("x" * 1000, max_line_chars=100)
    # Hand-computed: the marker for 1000 characters is " … (1,000 more characters)"
    # (26 characters), so 74 are kept and 926 are said to be cut.
    assert text == "x" * 74 + " … (926 more characters)"
    assert len(text) <= 100


def test_many_lines_keep_the_first_ones_and_count_the_rest():
    text = messages.clip("\n".join(str(k) for k in range(100)), max_lines=5)
    assert text.splitlines() == ["0", "1", "2", "3", "… (96 more lines)"]


def test_the_total_is_bounded_too():
    text = messages.clip("\n".join("y" * 500 for _ in range(20)), max_chars=1200)
    lines = text.splitlines()
    # 500 + 500 fit (with their newlines: 1002), the third gets the 198 left.
    assert [len(line) for line in lines[:2]] == [500, 500]
    assert lines[-1] == "… (17 more lines)"
    assert len(text) <= 1200 + len(lines[-1]) + 1


def test_one_line_keeps_only_the_first_line():
    assert messages.clip("first\nsecond", max_lines=1) == "first"


def test_error_text_never_raises():
    assert messages.error_text(ValueError("plain")) == "plain"
    assert "could not be shown" in messages.error_text(BrokenStrError())
    assert messages.one_line(BrokenStrError()).startswith("BrokenStrError: (its message could not")


def test_error_text_is_bounded_for_reading():
    text = messages.error_text(ValueError("z" * 100_000), limit=1000)
    assert text == "z" * 1000 + " … (99,000 more characters)"
    assert len(messages.error_text(ValueError("z" * 100_000), None)) == 100_000


def test_describe_and_one_line():
    error = ValueError("first line\nsecond line")
    assert messages.one_line(error) == "ValueError: first line"
    assert messages.describe(error) == "ValueError: first line\nsecond line"
    assert messages.one_line(ValueError()) == "ValueError"


@pytest.mark.parametrize(
    "make", [lambda s, h: Diagnosis("error", s, h), lambda s, h: Problem("Cell line 3", s, h)]
)
def test_diagnoses_and_banners_follow_the_rule(make):
    shown = make("s" * 1_000_000, "\n".join(["hint"] * 100))
    assert len(shown.summary) <= messages.MAX_LINE_CHARS
    assert "more characters" in shown.summary
    assert len(shown.hint.splitlines()) <= 4


def test_a_diagnosis_message_is_at_most_twelve_lines():
    diagnosis = Diagnosis("error", "\n".join(f"s{k}" for k in range(50)), "h\n" * 50)
    assert len(diagnosis.message().splitlines()) <= messages.MAX_LINES
