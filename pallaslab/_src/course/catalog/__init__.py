"""Every exercise of the course, by notebook; the hidden references live here.

A teacher hands out `notebooks/` without `notebooks/solutions/`; the references stay
in the package, so students get feedback without seeing an answer next to the task.
"""

from __future__ import annotations

import functools

from pallaslab._src.course.catalog import (
    attention,
    debugging,
    grid,
    masks,
    matmul,
    mosaic_gpu,
    refs,
    templating,
    tour,
    tpu,
)
from pallaslab._src.course.spec import Exercise

_MODULES = (tour, refs, grid, masks, matmul, templating, attention, tpu, debugging, mosaic_gpu)


@functools.cache
def all_exercises() -> tuple[Exercise, ...]:
    """Every exercise, in course order."""
    found = tuple(exercise for module in _MODULES for exercise in module.EXERCISES)
    ids = [e.id for e in found]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise RuntimeError(f"exercise ids used twice: {', '.join(sorted(duplicates))}")
    return found


def find(exercise_id: str) -> Exercise:
    """The exercise with this id ("04.k_loop").

    Raises:
        KeyError: Naming the closest ids, when there is no such exercise.
    """
    import difflib  # noqa: PLC0415

    for exercise in all_exercises():
        if exercise.id == exercise_id:
            return exercise
    ids = [e.id for e in all_exercises()]
    close = difflib.get_close_matches(exercise_id, ids, n=3, cutoff=0.5)
    prefix = exercise_id.split(".", maxsplit=1)[0]
    same_notebook = [i for i in ids if i.startswith(prefix + ".")]
    known = close or same_notebook or ids
    raise KeyError(f"no exercise {exercise_id!r}; did you mean {', '.join(known)}?")
