"""The course's exercises: solutions pass, starters fail as intended, feedback is specific.

- every exercise of the catalog has a solution in `notebooks/solutions/` that passes;
- every exercise appears in its notebook in a checked cell whose saved output is the
  feedback the starter code gets now (the unsolved exercise fails with the intended
  message), and that feedback is specific: an error, a known mistake, a requirement, or
  what the emulator found, not only "wrong";
- every known mistake is recognised by its outputs;
- the grader's other paths (not a function, no kernel, a block out of bounds, wrong
  output shapes, a later case's error, rounding, edge blocks) say what they should.
"""

from __future__ import annotations

import dataclasses
import json
import re
import runpy
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core.seeded import materialize
from pallaslab._src.course import catalog, grade
from pallaslab._src.course.requirements import one_kernel, operations_outside_kernels
from pallaslab._src.course.spec import Case, Exercise, Mistake
from pallaslab._src.views.feedback import feedback_html

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXERCISES = catalog.all_exercises()


def _solutions() -> dict[str, object]:
    found: dict[str, object] = {}
    for path in sorted((NOTEBOOKS / "solutions").glob("[0-9]*.py")):
        found.update(runpy.run_path(str(path))["SOLUTIONS"])
    return found


SOLUTIONS = _solutions()


def _notebook(name: str) -> dict:
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def _exercise_cells(name: str) -> list[tuple[str, dict]]:
    """(exercise id, cell) for each cell of a notebook that checks an exercise."""
    found = []
    for cell in _notebook(name)["cells"]:
        match = re.search(r'pallaslab\.exercise\("([^"]+)"', _source(cell))
        if cell["cell_type"] == "code" and match:
            found.append((match.group(1), cell))
    return found


def _saved_text(cell: dict) -> str:
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "text/plain" in data:
            text = data["text/plain"]
            return "".join(text) if isinstance(text, list) else text
    return ""


def _sanitized(text: str) -> str:
    return re.sub(r"Cell \[\d+\]", "Cell [N]", text)


# -- the catalog and its solutions -------------------------------------------------


def test_every_notebook_has_exercises_and_every_exercise_a_notebook():
    notebooks = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert [n[:2] for n in notebooks] == [f"{k:02d}" for k in range(10)]
    assert {e.notebook for e in EXERCISES} == set(notebooks)
    for exercise in EXERCISES:
        assert exercise.id.startswith(exercise.notebook[:2] + ".")
        assert len(exercise.cases) >= 2, f"{exercise.id} is checked on one shape only"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_solution_passes(exercise):
    assert exercise.id in SOLUTIONS, f"no solution for {exercise.id} in notebooks/solutions/"
    feedback = grade(exercise, SOLUTIONS[exercise.id])
    assert feedback.ok, feedback.summary()
    assert feedback.kind == "solved"
    assert all(case.ok for case in feedback.cases)
    assert len(feedback.cases) == len(exercise.cases)


def test_solutions_name_only_known_exercises():
    assert set(SOLUTIONS) == {e.id for e in EXERCISES}


# -- the starters in the notebooks -----------------------------------------------


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")), ids=lambda n: n[:2]
)
def test_unsolved_exercises_fail_with_the_intended_message(ip, name):
    cells = _exercise_cells(name)
    ids = [exercise_id for exercise_id, _ in cells]
    assert sorted(ids) == sorted(e.id for e in EXERCISES if e.notebook == name)
    for exercise_id, cell in cells:
        tags = cell.get("metadata", {}).get("tags", [])
        assert "nbval-check-output" in tags, f"{exercise_id}: its output is not checked by nbval"
        assert not _source(cell).startswith("%"), "exercise cells are plain Python"
        result = ip.run_cell(_source(cell))
        assert result.error_in_exec is None, f"{exercise_id}: {result.error_in_exec}"
        feedback = result.result
        assert isinstance(feedback, pallaslab.course.Feedback)
        assert not feedback.ok, f"{exercise_id}: the starter solves the exercise"
        specific = feedback.kind != "wrong-values" or bool(feedback.message)
        assert specific, f"{exercise_id}: the starter gets no specific feedback"
        saved = _saved_text(cell)
        assert saved, f"{exercise_id}: no saved output; run scripts/execute-notebooks"
        assert _sanitized(feedback.summary()) == _sanitized(saved)


def test_exercise_cells_are_self_contained_per_notebook():
    # The first exercise cell of each notebook imports what the exercises use, so a
    # teacher can hand out the exercise section alone.
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        cells = _exercise_cells(path.stem)
        assert "import pallaslab" in _source(cells[0][1]), path.name


# -- mistakes ----------------------------------------------------------------------


def _passthrough(output_fn):
    """A 'student' whose kernel copies what a known mistake computes."""

    def copy_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def copy(value):
        spec = jax.ShapeDtypeStruct(value.shape, value.dtype)
        return pl.pallas_call(copy_kernel, out_shape=spec)(value)

    def student(*args, **kwargs):
        return jax.tree.map(copy, output_fn(*args, **kwargs))

    return student


MISTAKES = [pytest.param(e, m, id=f"{e.id}-{m.name}") for e in EXERCISES for m in e.mistakes]


@pytest.mark.parametrize(("exercise", "mistake"), MISTAKES)
def test_known_mistakes_are_recognised(exercise, mistake):
    # A mistake may not get as far as outputs on every case (a block leaving a
    # non-square array): it is recognised on the cases where it computes something.
    def defined(case):
        try:
            mistake.output(*materialize(tuple(case.make()), 0), **case.kwargs)
        except ValueError:
            return False
        return True

    cases = tuple(case for case in exercise.cases if defined(case))
    assert cases, f"{mistake.name} computes nothing on any case"
    exercise = dataclasses.replace(exercise, cases=cases)
    feedback = grade(exercise, _passthrough(mistake.output))
    assert not feedback.ok
    assert feedback.kind == "mistake", feedback.summary()
    assert feedback.mistake == mistake.name
    assert feedback.hint == mistake.hint


# -- the grader's paths ------------------------------------------------------------


def _double(x, block=128):
    def kernel(x_ref, o_ref):
        o_ref[...] = 2 * x_ref[...]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(x.shape[0], block),),
        in_specs=[pl.BlockSpec((block,), lambda i: (i,))],
        out_specs=pl.BlockSpec((block,), lambda i: (i,)),
    )(x)


def _exercise(**overrides) -> Exercise:
    fields = {
        "id": "99.double",
        "notebook": "99_test",
        "title": "Double",
        "task": "Write `double(x)`: 2 * x.",
        "reference": lambda x: 2 * x,
        "cases": (
            Case(lambda: (jax.ShapeDtypeStruct((256,), jnp.float32),)),
            Case(lambda: (jax.ShapeDtypeStruct((200,), jnp.float32),)),
        ),
        "hint": "Multiply by 2.",
    }
    fields.update(overrides)
    return Exercise(**fields)


def test_a_right_kernel_is_solved_and_renders_green():
    feedback = grade(_exercise(), _double)
    assert feedback
    assert feedback.summary().splitlines()[0] == "✓ 99.double · Double: solved"
    assert [c.label for c in feedback.cases] == ["x: f32[256]", "x: f32[200]"]
    html = feedback_html(feedback)
    assert "✓ solved" in html and "<svg" not in html


def test_not_a_function():
    feedback = grade(_exercise(), 42)
    assert feedback.kind == "not-callable"
    assert "pallaslab.exercise('99.double', my_function)" in feedback.message


def test_no_kernel_is_not_a_solution():
    feedback = grade(_exercise(), lambda x: 2 * x)
    assert feedback.kind == "no-kernel"
    assert not feedback.ok


def test_an_error_names_the_line_of_this_file():
    def broken(x):
        def kernel(x_ref, o_ref):
            if x_ref[0] > 0:
                o_ref[...] = x_ref[...]

        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    feedback = grade(_exercise(), broken)
    assert feedback.kind == "error"
    line = broken.__code__.co_firstlineno + 2
    assert feedback.location == f"test_course.py line {line}"
    assert feedback.message.startswith(f"On x: f32[256]: test_course.py line {line}: Python 'if'")
    assert "pl.when" in feedback.hint


def test_a_block_outside_its_array():
    def offsets(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(2,),
            in_specs=[pl.BlockSpec((128,), lambda i: (i * 128,))],
            out_specs=pl.BlockSpec((128,), lambda i: (i,)),
        )(x)

    feedback = grade(_exercise(), offsets)
    assert feedback.kind == "out-of-bounds"
    assert "covers elements 16384..16511 of dimension 0" in feedback.message
    assert feedback.location.startswith("test_course.py line ")


def test_wrong_output_shape():
    def halves(x):
        return _double(x[: x.shape[0] // 2])

    feedback = grade(_exercise(), halves)
    assert feedback.kind == "output-shape"
    assert "the exercise expects shape (256,) but your function returns (128,)" in feedback.message


def test_two_outputs_where_one_is_expected():
    def both(x):
        return _double(x), _double(x)

    feedback = grade(_exercise(), both)
    assert feedback.kind == "output-shape"
    assert "the exercise expects 1 array(s) but your function returns 2" in feedback.message


def test_edge_blocks_get_the_edge_hint():
    def floor_grid(x, block=128):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., 2 * x_ref[...]),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(x.shape[0] // block,),
            in_specs=[pl.BlockSpec((block,), lambda i: (i,))],
            out_specs=pl.BlockSpec((block,), lambda i: (i,)),
        )(x)

    feedback = grade(_exercise(), floor_grid)
    assert [c.ok for c in feedback.cases] == [True, False]
    assert (
        feedback.cases[1].summary == "wrong in the last block of o_ref: 72 of 200 elements, 72 NaN"
    )
    # The emulator says why: no program writes the tail.
    assert "elements no program writes" in feedback.message
    assert "pl.cdiv" in feedback.hint
    html = feedback_html(feedback)
    assert "<svg" in html and "block 1: 72 of 128 elements differ" in html


def test_rounding_gets_the_precision_hint():
    exercise = _exercise(reference=lambda x: 2 * x + 1e-4 * jnp.abs(x).max())
    feedback = grade(exercise, _double)
    assert feedback.kind == "wrong-values"
    assert "float32" in feedback.hint


def test_a_later_error_is_a_note_when_an_earlier_case_is_wrong():
    def square_only(x):
        assert x.shape[0] == 256, "only 256"
        return _double(x) + 1

    feedback = grade(_exercise(), square_only)
    assert feedback.kind == "wrong-values"
    assert len(feedback.cases) == 1
    assert any("AssertionError: only 256" in note for note in feedback.notes)


def test_requirements_are_checked_once_values_are_right():
    def outside(x):
        return jnp.tanh(_double(x))

    exercise = _exercise(reference=lambda x: jnp.tanh(2 * x), requirements=(one_kernel(),))
    feedback = grade(exercise, outside)
    assert feedback.kind == "requirement"
    assert feedback.requirement == "one-kernel"
    assert feedback.message == (
        "The values are right, but your function computes outside the kernel: 'tanh' runs in XLA."
    )


def test_operations_outside_kernels_ignore_bookkeeping():
    x = jax.ShapeDtypeStruct((256,), jnp.float32)
    assert operations_outside_kernels(pallaslab.inspect(jax.jit(_double), x)) == []
    reshaped = pallaslab.inspect(lambda v: _double(v.reshape(2, 128).reshape(256)), x)
    assert operations_outside_kernels(reshaped) == []
    summed = pallaslab.inspect(lambda v: _double(v) + v, x)
    assert operations_outside_kernels(summed) == ["add"]


def test_feedback_html_escapes_text():
    exercise = _exercise(title="<b>bold</b> & co")
    html = feedback_html(grade(exercise, _double))
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in html


def test_mistake_is_preferred_over_generic_feedback():
    exercise = _exercise(
        mistakes=(Mistake("triples", lambda x: 3 * x, "You multiply by 3."),),
    )

    def triple(x):
        return _double(x) + x

    assert grade(exercise, triple).hint == "You multiply by 3."


# -- the public API ----------------------------------------------------------------


def test_exercise_by_id_and_lists():
    assert pallaslab.exercise("00.relu", SOLUTIONS["00.relu"]).ok
    with pytest.raises(KeyError, match=r"did you mean 00\.relu"):
        pallaslab.exercise("00.rleu", SOLUTIONS["00.relu"])
    assert [e.id for e in pallaslab.exercises("04")] == ["04.k_loop", "04.batched"]
    assert pallaslab.exercises("04_tiled_matmul") == pallaslab.exercises("04")
    assert len(pallaslab.exercises()) == len(EXERCISES)


def test_feedback_is_falsy_until_solved():
    feedback = grade(_exercise(), lambda x: 2 * x)
    assert not feedback
    assert feedback.summary().startswith("✗ 99.double · Double: not yet")


# -- notebook 09: Mosaic GPU kernels graded through JAX's interpreter ----------------


def _mosaic_double(
    x, *, third_for_cta: int | None = None, own_rows: bool = True, own_barrier: bool = True
):
    """09.warpgroups' kernel, wrong on purpose: one CTA triples, both warpgroups store
    the same rows, or they use the barrier array without picking theirs."""
    from jax import lax
    from jax.experimental.pallas import mosaic_gpu as plgpu

    rows, cols = x.shape

    def body(x_gmem, o_gmem, x_smem, loaded):
        cta, wg = lax.axis_index("cta"), lax.axis_index("wg")
        mine = pl.ds(wg * 16, 16)
        window = pl.ds(cta * 32 + (wg * 16 if own_rows else 0), 16)
        barrier = loaded.at[wg] if own_barrier else loaded
        plgpu.copy_gmem_to_smem(x_gmem.at[window], x_smem.at[mine], barrier)  # copy-line
        plgpu.barrier_wait(barrier)
        factor = jnp.where(cta == (-1 if third_for_cta is None else third_for_cta), 3.0, 2.0)
        x_smem[mine] = x_smem[mine] * factor
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(x_smem.at[mine], o_gmem.at[window])
        plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows // 32,),
        grid_names=("cta",),
        num_threads=2,
        thread_name="wg",
        scratch_types=[
            plgpu.SMEM((32, cols), x.dtype),
            plgpu.Barrier(num_arrivals=1, num_barriers=2),
        ],
    )(x)


def test_a_mosaic_gpu_answer_is_located_on_the_windows_its_ctas_store():
    exercise = dataclasses.replace(
        catalog.find("09.warpgroups"), cases=(catalog.find("09.warpgroups").cases[0],)
    )
    feedback = grade(exercise, lambda x: _mosaic_double(x, third_for_cta=1))
    assert not feedback.ok and feedback.kind == "wrong-values"
    (point,) = feedback.check.points
    assert point.result.mode == "mosaic-gpu-interpret"
    (tile,) = point.comparison.tiles
    # Oracle by hand: (64, 128) stored in (16, 128) windows, two per CTA; CTA 1 owns
    # rows 32..63, windows 2 and 3.
    assert tile.tile_shape == (16, 128) and tile.counts.shape == (4, 1)
    assert tile.bad_tiles == ((2, 0), (3, 0))
    assert tile.bad_programs == ((1,),) and tile.grid == (2,)
    assert "wrong in 2 of 4 blocks of o_gmem" in feedback.cases[0].summary


def test_rows_no_warpgroup_stores_are_named_with_the_warpgroup_hint():
    feedback = grade(catalog.find("09.warpgroups"), lambda x: _mosaic_double(x, own_rows=False))
    assert not feedback.ok and feedback.kind == "wrong-values"
    # Each CTA's second 16 rows are never stored: half the output, NaN in the interpreter.
    assert "4,096 elements of o_gmem are never written (2 of 4 blocks" in feedback.message
    assert "warpgroup" in feedback.hint and "lax.axis_index" in feedback.hint
    (tile, *_) = feedback.check.points[0].comparison.tiles
    assert tile.bad_tiles == ((1, 0), (3, 0))


def test_a_check_the_interpreter_makes_is_the_kernels_mistake_at_its_line():
    feedback = grade(catalog.find("09.warpgroups"), lambda x: _mosaic_double(x, own_barrier=False))
    assert not feedback.ok and feedback.kind == "error"
    line = next(
        n
        for n, text in enumerate(Path(__file__).read_text().splitlines(), 1)
        if "# copy-line" in text
    )
    assert feedback.location == f"test_course.py line {line}"
    assert "interpreter stopped the kernel" in feedback.message
    assert "barrier without indexing" in feedback.message
    # Not blamed on the interpreter: it is no operation it lacks.
    assert "not every operation" not in feedback.hint and "fix what it names" in feedback.hint


def test_a_matmul_off_the_tensor_cores_misses_the_requirement():
    from jax import lax
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def matmul(a, b):  # right values, with a dot in registers rather than a wgmma
        m, n = a.shape[0], b.shape[1]

        def body(a_gmem, b_gmem, o_gmem):
            i, j = lax.axis_index("m"), lax.axis_index("n")
            rows, cols = pl.ds(i * 64, 64), pl.ds(j * 128, 128)
            o_gmem[rows, cols] = jnp.dot(
                a_gmem[rows, :], b_gmem[:, cols], preferred_element_type=jnp.float32
            )

        return plgpu.kernel(
            body,
            out_type=jax.ShapeDtypeStruct((m, n), jnp.float32),
            grid=(m // 64, n // 128),
            grid_names=("m", "n"),
        )(a, b)

    feedback = grade(catalog.find("09.wgmma"), matmul)
    assert not feedback.ok, feedback.summary()
    assert feedback.kind == "requirement" and feedback.requirement == "tensor-cores"
    assert "plgpu.wgmma" in feedback.hint


@pytest.mark.gpu
@pytest.mark.parametrize(
    "exercise", [e for e in EXERCISES if e.notebook == "09_mosaic_gpu"], ids=lambda e: e.id
)
def test_on_a_hopper_gpu_notebook_09s_solutions_run_compiled_and_pass(exercise):
    from pallaslab._src.core import chips

    if chips.gpu_here() not in {"H100", "H200"}:
        pytest.skip(f"wgmma needs a Hopper GPU (sm_90a), not {chips.gpu_here()}")
    feedback = grade(exercise, SOLUTIONS[exercise.id])
    assert feedback.ok, feedback.summary()
    assert all(point.result.mode == "compiled" for point in feedback.check.points)
