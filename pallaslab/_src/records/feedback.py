"""What a student sees after checking an exercise: a verdict, where it is wrong, a hint.

Plain records (no JAX). In Jupyter the course's feedback view draws them (the verdict,
one line per case, a heatmap of the output blocks that differ); elsewhere `summary()`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pallaslab._src.base import display
from pallaslab._src.records.checks import CheckResult


@dataclasses.dataclass(frozen=True)
class CaseOutcome:
    """How the student's function did on one case.

    Attributes:
        label: The case in words ("x: f32[1000]").
        ok: Whether it ran and matched the reference.
        summary: "ok", or what went wrong on this case, in one line.
    """

    label: str
    ok: bool
    summary: str


# The kinds of feedback, from the first thing that went wrong.
KINDS = (
    "solved",
    "not-callable",  # the student passed something that is not a function
    "error",  # tracing or running raised; `location` names the line
    "no-kernel",  # it ran no Pallas kernel
    "out-of-bounds",  # a block lies wholly outside its array, or a slice outside its block
    "output-shape",  # wrong number, shape or dtype of outputs
    "mistake",  # the outputs are those of a known mistake
    "wrong-values",  # the outputs differ from the reference
    "requirement",  # right values, but a requirement is not met
)


@dataclasses.dataclass(frozen=True)
class Feedback:
    """The verdict on one attempt at an exercise.

    `bool(feedback)` is whether it is solved, so `assert pallaslab.exercise(...)`
    works in grading scripts.

    Attributes:
        exercise: The exercise's id ("04.matmul").
        title: Its title.
        ok: Whether the attempt is right on every case and meets every requirement.
        kind: What went wrong first (see `KINDS`); "solved" when nothing did.
        message: What is wrong, in a sentence or two ("" when solved).
        hint: What to try ("" when solved).
        cases: One outcome per case checked.
        location: The source line an error points at ("Cell [5] line 3"), if any.
        mistake: The name of the known mistake recognised, if any.
        requirement: The name of the requirement not met, if any.
        notes: Other things worth knowing (races under another backend's rules ...).
        check: The comparison with the reference per case, with the output blocks
            that differ (None when nothing could be compared).
    """

    exercise: str
    title: str
    ok: bool
    kind: str
    message: str = ""
    hint: str = ""
    cases: tuple[CaseOutcome, ...] = ()
    location: str = ""
    mistake: str = ""
    requirement: str = ""
    notes: tuple[str, ...] = ()
    check: CheckResult | None = dataclasses.field(default=None, compare=False, repr=False)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def verdict(self) -> str:
        """The verdict in words: "solved" or "not yet"."""
        return "solved" if self.ok else "not yet"

    def summary(self) -> str:
        """The feedback as text: verdict, cases, what is wrong, the hint."""
        mark = "✓" if self.ok else "✗"
        lines = [f"{mark} {self.exercise} · {self.title}: {self.verdict}"]
        lines += [f"  {c.label}: {c.summary}" for c in self.cases]
        if self.message:
            lines.append(self.message)
        if self.hint:
            lines.append(f"Hint: {self.hint}")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        return display.mimebundle("feedback", self, **kwargs)
