"""The course's exercises with automatic feedback.

`exercise("04.k_loop", matmul)` checks a student's function against the exercise's
hidden reference on several shapes and returns `Feedback`: the verdict, which output
blocks are wrong, and a hint as specific as what was found (an error explained at its
line, a known mistake recognised by its outputs, a padding leak or race the emulator
found, a requirement such as "race-free on GPU").
"""

from __future__ import annotations

from typing import Any

from pallaslab._src.course.catalog import all_exercises, find
from pallaslab._src.course.grading import grade
from pallaslab._src.course.spec import Case, Exercise, Mistake, Requirement
from pallaslab._src.records.feedback import CaseOutcome, Feedback

__all__ = [
    "Case",
    "CaseOutcome",
    "Exercise",
    "Feedback",
    "Mistake",
    "Requirement",
    "exercise",
    "exercises",
    "grade",
]


def exercise(exercise_id: str, fn: Any) -> Feedback:
    """Checks your function against an exercise of the course.

    Args:
        exercise_id: The exercise, as the notebook names it ("04.k_loop").
        fn: Your function; it takes the arguments the exercise's task names.

    Returns:
        Feedback: `bool(feedback)` is whether it is solved; in Jupyter it shows the
        verdict per case, the output blocks that differ and a hint.

    Raises:
        KeyError: When there is no such exercise (naming the closest ones).

    Example:
        >>> pallaslab.exercise("00.relu", relu)
        ✓ 00.relu · ReLU without a Python if: solved
    """
    return grade(find(exercise_id), fn)


def exercises(notebook: str | None = None) -> tuple[Exercise, ...]:
    """The course's exercises, in order; those of one notebook ("04" or "04_tiled_matmul")."""
    found = all_exercises()
    if notebook is None:
        return found
    return tuple(
        e for e in found if e.notebook == notebook or e.id.split(".")[0] == notebook.split("_")[0]
    )
