"""Checking a student's function against an exercise's hidden reference.

On every case: trace the function (an error is explained with the line it points at),
check it runs a Pallas kernel whose blocks lie in their arrays, run it (emulated on
CPU, which also finds padding leaks and confirms races), and compare with the
reference block by block. Then the first thing that is wrong decides the feedback:
an error, the outputs' shapes, a known mistake, wrong blocks (with what the emulator
found), an unmet requirement. The hint is as specific as what was found.
"""

from __future__ import annotations

import dataclasses
import inspect as pyinspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pallaslab._src.core import programs, running, tiling
from pallaslab._src.core.comparison import compare
from pallaslab._src.core.diagnose import SourceNamer, diagnose
from pallaslab._src.core.inspection import Inspection, trace
from pallaslab._src.core.seeded import materialize
from pallaslab._src.course import cells
from pallaslab._src.course.spec import Case, Exercise
from pallaslab._src.records import Leak, OutOfBounds, RunResult, TileMismatch, short_dtype
from pallaslab._src.records.checks import CheckPoint, CheckResult
from pallaslab._src.records.feedback import CaseOutcome, Feedback

_LEAK_HINTS = {
    "padding": (
        "An edge block hangs over the end of its array, and what lies past the end is "
        "padding (NaN here): keep it out of the result. Mask the lanes past the end "
        "(compare a jax.lax.broadcasted_iota with the array's size and use jnp.where, "
        "or load with mask= and other=), or pick blocks that divide the array."
    ),
    "never-written": (
        "No program writes some elements of the output: the grid must cover all of it. "
        "pl.cdiv(n, block) programs cover n elements; n // block leaves the tail out."
    ),
    "uninitialized-output": (
        "An output block is read before anything was written to it: an output ref starts "
        "as garbage. Initialise it on the first step of the reduction "
        "(@pl.when(pl.program_id(axis) == 0)) before adding to it."
    ),
    "uninitialized-scratch": (
        "A scratch buffer is read before it is written: scratch starts as garbage. "
        "Initialise it on the first step (@pl.when(pl.program_id(axis) == 0))."
    ),
    "masked-load-without-other": (
        "A masked load leaves the lanes its mask turns off undefined (on a GPU they hold "
        "anything), and they reach the result. Give the load a value for them "
        "(other=0.0, or -inf before a max), or drop them with jnp.where(mask, x, 0)."
    ),
}

_SLICE_HINT = (
    "A pl.ds(start, size) inside a kernel indexes the program's block, not the whole "
    "array: its start is an offset into the block (the BlockSpec already moved the block "
    "to the program's place). Past the end, JAX moves the slice back inside the block, so "
    "the kernel quietly reads or writes other elements."
)

_EDGE_HINT = (
    "Your kernel is right where the size is a whole number of blocks and wrong where it "
    "is not: the last block hangs over the end of the array. Cover the whole array "
    "(pl.cdiv) and mask what lies past its end."
)

_UNWRITTEN_HINT = (
    "In a Mosaic GPU kernel each CTA (and each warpgroup) writes the part of the output it "
    "picks: the window of its plgpu.copy_smem_to_gmem or store. Build the window from "
    "lax.axis_index of the grid axis (and of the warpgroup axis), so that together they "
    "cover the whole output once."
)

_PRECISION_HINT = (
    "Your results are close to the reference but outside its tolerance: accumulate in "
    "float32 (preferred_element_type=jnp.float32 on jnp.dot, a float32 accumulator) "
    "and cast once at the end."
)


@dataclasses.dataclass(frozen=True)
class _Attempt:
    """One case, run: what the student's function gave and what was expected."""

    label: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inspection: Inspection
    result: RunResult
    point: CheckPoint

    @property
    def ok(self) -> bool:
        return self.point.ok


def grade(exercise: Exercise, fn: Any, *, name_source: SourceNamer | None = None) -> Feedback:
    """Checks `fn` against the exercise on all its cases.

    Args:
        exercise: The exercise.
        fn: The student's function; it takes the case's arguments.
        name_source: Names source files in messages (default: notebook cells as
            "Cell [5] line", other files by their name).

    Returns:
        The feedback: verdict, per-case outcomes, what is wrong and a hint.
    """
    namer = name_source or cells.name_source
    base: dict[str, Any] = {"exercise": exercise.id, "title": exercise.title}
    if not callable(fn):
        return Feedback(
            **base,
            ok=False,
            kind="not-callable",
            message=(
                f"Pass the function to check, as in pallaslab.exercise({exercise.id!r}, "
                f"my_function); this is a {type(fn).__name__}."
            ),
            hint=exercise.task,
        )
    attempts: list[_Attempt] = []
    outcomes: list[CaseOutcome] = []
    stopped: Feedback | None = None
    for index, case in enumerate(exercise.cases):
        stopped, attempt = _attempt(
            exercise, case, index=index, fn=fn, namer=namer, outcomes=outcomes
        )
        if stopped is not None:
            break
        assert attempt is not None
        attempts.append(attempt)
        outcomes.append(CaseOutcome(attempt.label, attempt.ok, _case_summary(attempt.point)))
    failing = [a for a in attempts if not a.ok]
    if stopped is not None and not failing:
        return stopped
    points = tuple(a.point for a in attempts)
    check = CheckResult(name=attempts[0].inspection.name, points=points, seed=exercise.seed)
    base_fields: dict[str, Any] = {**base, "cases": tuple(outcomes), "check": check}
    if failing:
        # Wrong values on a simpler case explain more than a later case's error.
        later = (stopped.message,) if stopped is not None else ()
        feedback = _wrong(exercise, attempts, failing, base_fields)
        return dataclasses.replace(feedback, notes=(*feedback.notes, *later))
    chance = _right_by_chance(attempts, namer, base_fields)
    if chance is not None:
        return chance
    for requirement in exercise.requirements:
        problem = requirement.test(attempts[0].inspection)
        if problem:
            return Feedback(
                **base_fields,
                ok=False,
                kind="requirement",
                message=f"The values are right, but {_lower_first(problem)}",
                hint=requirement.hint,
                requirement=requirement.name,
            )
    return Feedback(**base_fields, ok=True, kind="solved", notes=_race_notes(attempts))


def _right_by_chance(
    attempts: Sequence[_Attempt], namer: SourceNamer, base_fields: dict[str, Any]
) -> Feedback | None:
    """Right values that rest on what a GPU or TPU would not give: not solved.

    A slice outside its block (JAX clamps it back inside, here) or the masked-out
    lanes of a load without `other=` reaching the result (memory that happened to hold
    the right values here).
    """
    outside = next((o for a in attempts for o in a.result.out_of_bounds), None)
    undefined = next(
        (
            leak
            for a in attempts
            for leak in a.result.leaks
            if leak.cause == "masked-load-without-other"
        ),
        None,
    )
    finding: OutOfBounds | Leak | None = outside or undefined
    if finding is None:
        return None
    where = ""
    if finding.location is not None:
        named = namer(finding.location.file)
        where = f"{named} {finding.location.line}" if named else ""
    if isinstance(finding, OutOfBounds):
        kind = "out-of-bounds"
        hint = _SLICE_HINT if finding.cause == "clamped-slice" else _LEAK_HINTS["padding"]
    else:
        kind, hint = "wrong-values", _LEAK_HINTS[finding.cause]
    return Feedback(
        **base_fields,
        ok=False,
        kind=kind,
        message="The values match here, but only by chance: "
        + _lower_first(finding.describe(with_location=False)),
        hint=hint,
        location=where,
    )


def _attempt(
    exercise: Exercise,
    case: Case,
    *,
    index: int,
    fn: Callable[..., Any],
    namer: SourceNamer,
    outcomes: list[CaseOutcome],
) -> tuple[Feedback | None, _Attempt | None]:
    """Runs one case: the attempt, or feedback when it cannot be compared."""
    args, kwargs = materialize((tuple(case.make()), dict(case.kwargs)), exercise.seed + index)
    label = case.label or _shapes_label(fn, args)
    try:
        inspection = trace(fn, args, kwargs)
    except Exception as error:
        return _error(exercise, error, namer, label, outcomes), None
    label = case.label or _program_label(inspection)
    early = _structure(
        exercise,
        inspection,
        args=args,
        kwargs=kwargs,
        label=label,
        namer=namer,
        outcomes=outcomes,
    )
    if early is not None:
        return early, None
    try:
        result = running.run(inspection, args, kwargs)
    except Exception as error:
        return _error(exercise, error, namer, label, outcomes), None
    expected = exercise.reference(*args, **kwargs)
    compared = programs.compare_outputs(inspection, list(result.values), expected, args, kwargs)
    point = CheckPoint(
        label, None, None, inspection.args, compared, result, program=inspection.name
    )
    return None, _Attempt(label, args, dict(kwargs), inspection, result, point)


# -- before running -------------------------------------------------------------


def _structure(
    exercise: Exercise,
    inspection: Inspection,
    *,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    label: str,
    namer: SourceNamer,
    outcomes: list[CaseOutcome],
) -> Feedback | None:
    """Feedback when the traced program cannot be right whatever it computes."""
    base: dict[str, Any] = {"exercise": exercise.id, "title": exercise.title}
    if not inspection.kernels:
        return Feedback(
            **base,
            ok=False,
            kind="no-kernel",
            message="Your function runs no Pallas kernel: the exercise is to write one.",
            hint="Compute the result inside a kernel called with pl.pallas_call.",
            cases=(*outcomes, CaseOutcome(label, False, "no Pallas kernel")),
        )
    for kernel, stray in tiling.stray_blocks(inspection, args, kwargs):
        index_map = stray.operand.index_map
        where = ""
        if index_map is not None and index_map.source_file:
            named = namer(index_map.source_file)
            where = f"{named} {index_map.source_line}" if named else ""
        return Feedback(
            **base,
            ok=False,
            kind="out-of-bounds",
            message=f"On {label}: in kernel {kernel.name}, {stray.describe()}",
            hint=(
                "Every block needs at least one element inside its array: check the grid "
                "and the index map (it returns block indices, not element offsets)."
            ),
            location=where,
            cases=(*outcomes, CaseOutcome(label, False, "a block lies outside its array")),
        )
    return None


def _error(
    exercise: Exercise,
    error: BaseException,
    namer: SourceNamer,
    label: str,
    outcomes: list[CaseOutcome],
) -> Feedback:
    diagnosis = diagnose(error, namer)
    where = f"{diagnosis.label} {diagnosis.line}" if diagnosis.label and diagnosis.line else ""
    return Feedback(
        exercise=exercise.id,
        title=exercise.title,
        ok=False,
        kind="error",
        message=f"On {label}: " + (f"{where}: " if where else "") + diagnosis.summary,
        hint=diagnosis.hint or exercise.hint,
        location=where,
        cases=(*outcomes, CaseOutcome(label, False, f"error: {diagnosis.title}")),
    )


# -- wrong values ----------------------------------------------------------------


def _wrong(
    exercise: Exercise,
    attempts: Sequence[_Attempt],
    failing: Sequence[_Attempt],
    base: dict[str, Any],
) -> Feedback:
    problem = next((a for a in failing if a.point.comparison and a.point.comparison.problem), None)
    if problem is not None and problem.point.comparison is not None:
        return Feedback(
            **base,
            ok=False,
            kind="output-shape",
            message=f"On {problem.label}: {_as_student(problem.point.comparison.problem)}.",
            hint=(
                "out_shape says what the kernel returns: one jax.ShapeDtypeStruct per "
                "output, with the expected shape and dtype."
            ),
        )
    for mistake in exercise.mistakes:
        if all(_matches(mistake.output, a) for a in failing):
            return Feedback(
                **base, ok=False, kind="mistake", hint=mistake.hint, mistake=mistake.name
            )
    leaks = [leak for a in failing for leak in a.result.leaks]
    races = [r for a in failing for r in a.result.race_checks if r.confirmed]
    outside = [o for a in failing for o in a.result.out_of_bounds]
    message, hint = "", exercise.hint
    if outside:
        message = outside[0].describe(with_location=False)
        hint = _SLICE_HINT if outside[0].cause == "clamped-slice" else exercise.hint
    elif leaks:
        first = _first_leak(leaks)
        message = first.describe(with_location=False)
        hint = _LEAK_HINTS.get(first.cause, exercise.hint)
    elif races:
        message = races[0].describe()
    elif unwritten := _unwritten_in_interpreter(failing):
        message, hint = unwritten, _UNWRITTEN_HINT
    elif len(failing) < len(attempts) and all(_edge_only(a) for a in failing):
        hint = _EDGE_HINT
    elif all(_close(a) for a in failing):
        hint = _PRECISION_HINT
    return Feedback(**base, ok=False, kind="wrong-values", message=message, hint=hint)


def _unwritten_in_interpreter(failing: Sequence[_Attempt]) -> str:
    """What nothing wrote, in a Mosaic GPU kernel run by JAX's interpreter ("" if none).

    The interpreter fills GMEM and SMEM nothing wrote with NaN (a GPU leaves whatever was
    there): NaN in an output whose reference has none is an element no copy or store
    reached.
    """
    for attempt in failing:
        comparison = attempt.point.comparison
        if attempt.result.mode != "mosaic-gpu-interpret" or comparison is None:
            continue
        for tile in comparison.tiles:
            if tile.nan_count and not tile.reference_nonfinite:
                blocks = int(np.count_nonzero(tile.nonfinite))
                total = int(tile.nonfinite.size)
                return (
                    f"On {attempt.label}: {tile.nan_count:,} elements of "
                    f"{tile.operand or tile.output} are never written ({blocks} of {total} "
                    "blocks hold NaN, which JAX's Mosaic GPU interpreter puts where no copy "
                    "or store of any CTA or warpgroup wrote)."
                )
    return ""


def _matches(output: Callable[..., Any], attempt: _Attempt) -> bool:
    """Whether the student's outputs are those of a known mistake on this case."""
    try:
        wrong = output(*attempt.args, **attempt.kwargs)
    except Exception:
        return False
    return compare(list(attempt.result.values), wrong).ok


def _first_leak(leaks: Sequence[Leak]) -> Leak:
    # The most specific cause first: an uninitialised scratch buffer also makes the
    # output it flows into look uninitialised; uninitialised memory explains more than
    # padding.
    order = (
        "masked-load-without-other",
        "uninitialized-scratch",
        "uninitialized-output",
        "never-written",
        "padding",
    )
    return min(leaks, key=lambda leak: order.index(leak.cause) if leak.cause in order else 9)


def _edge_only(attempt: _Attempt) -> bool:
    """Whether only blocks at the far end of some dimension differ."""
    comparison = attempt.point.comparison
    if comparison is None:
        return False
    bad = [t for t in comparison.tiles if t.bad_tiles]
    return bool(bad) and all(_at_far_edge(t) for t in bad)


def _at_far_edge(tile: TileMismatch) -> bool:
    counts = tile.tiles
    uneven = [
        d
        for d, (size, block) in enumerate(zip(tile.shape, tile.tile_shape, strict=True))
        if size % block
    ]
    if not uneven:
        return False
    return all(any(t[d] == counts[d] - 1 for d in uneven) for t in tile.bad_tiles)


def _close(attempt: _Attempt) -> bool:
    """Whether the outputs differ from the reference only by rounding."""
    comparison = attempt.point.comparison
    if comparison is None or comparison.problem or not math.isfinite(comparison.max_rel_err):
        return False
    has_nonfinite = any(t.nan_count or t.inf_count for t in comparison.tiles)
    return not has_nonfinite and comparison.max_abs_err <= 50 * max(comparison.atol, 1e-30)


def _case_summary(point: CheckPoint) -> str:
    if point.ok:
        return "ok"
    comparison = point.comparison
    if comparison is None:
        return point.error or "could not be compared"
    if comparison.problem:
        return _as_student(comparison.problem)
    parts = []
    for tile in comparison.tiles:
        if not (tile.bad_tiles or tile.nan_count or tile.inf_count):
            continue
        size = int(np.prod(tile.shape))
        bad = int(tile.counts.sum())
        where = f"{tile.pattern} of {tile.operand or tile.output}" if tile.pattern else tile.output
        text = f"wrong in {where}: {bad} of {size} elements"
        if tile.nan_count:
            text += f", {tile.nan_count} NaN"
        if tile.inf_count:
            text += f", {tile.inf_count} Inf"
        parts.append(text)
    return "; ".join(parts) or f"{comparison.mismatched} elements differ"


def _as_student(problem: str) -> str:
    """A comparison's problem, worded for the student: "your function", "the exercise"."""
    for said, meant in (
        ("the program returns", "your function returns"),
        ("the reference has", "the exercise expects"),
        ("the reference gives", "the exercise expects"),
    ):
        problem = problem.replace(said, meant)
    return problem


def _race_notes(attempts: Sequence[_Attempt]) -> tuple[str, ...]:
    notes = []
    for attempt in attempts[:1]:
        kernels = attempt.inspection.kernels
        for check in attempt.result.race_checks:
            if not check.confirmed or check.kernel_index >= len(kernels):
                continue
            backend = kernels[check.kernel_index].backend
            targets = {"mosaic_tpu": "tpu", "triton": "gpu", "mosaic_gpu": "gpu"}.get(backend)
            if targets is None or targets == check.backend:
                notes.append(check.describe())
    return tuple(notes)


def _shapes_label(fn: Callable[..., Any], args: Sequence[Any]) -> str:
    try:
        names = list(pyinspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    shapes = []
    for k, arg in enumerate(args):
        if not hasattr(arg, "dtype"):
            continue
        text = f"{short_dtype(str(arg.dtype))}[{','.join(map(str, np.shape(arg)))}]"
        shapes.append(f"{names[k]}: {text}" if k < len(names) else text)
    return ", ".join(shapes) or "no arguments"


def _program_label(inspection: Inspection) -> str:
    return ", ".join(f"{spec.path}: {spec}" for spec in inspection.args) or "no arguments"


def _lower_first(text: str) -> str:
    # "GPU race ..." stays as it is; "Your function ..." becomes "your function ...".
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        return text[0].lower() + text[1:]
    return text
