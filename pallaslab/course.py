"""The course's types: what `pallaslab.exercise` returns and what exercises are made of.

Students call `pallaslab.exercise("04.k_loop", matmul)` (a `Feedback`) and
`pallaslab.exercises("04")` (the `Exercise`s of notebook 04). A teacher adding an
exercise writes an `Exercise` of `Case`s, `Mistake`s and `Requirement`s and checks a
function against it with `grade(exercise, fn)`.
"""

from pallaslab._src.course import grade
from pallaslab._src.course.spec import Case, Exercise, Mistake, Requirement
from pallaslab._src.records.feedback import CaseOutcome, Feedback

__all__ = ["Case", "CaseOutcome", "Exercise", "Feedback", "Mistake", "Requirement", "grade"]
