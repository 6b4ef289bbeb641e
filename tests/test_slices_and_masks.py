"""Slices past their block, and masked loads without `other=`, reported after a run.

On CPU a dynamic `pl.ds` past the end of a block is clamped back inside by JAX (so a
wrong kernel can match its reference), and the lanes a masked load without `other=`
turns off hold whatever memory holds. Both are found by running the instrumented
kernel body for every program, and reported with their source line. Oracles:
hand-computed reaches, the NumPy accesses interpreter (`Inspection.accesses`, one
program at a time) and Pallas' own interpreter (`interpret=True`).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

import pallaslab
from pallaslab._src.views.header import summary_text
from pallaslab._src.views.static_page import static_tab
from pallaslab._src.views.tabs import run as run_tab
from tests import corpus
from tests.test_whole_array_races import masked_add

SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker):
    (line,) = [n for n, text in enumerate(SOURCE, 1) if marker in text and "line_of" not in text]
    return line


def program_offset_into_block(n=512, block=128):
    """The issue's example: an array offset used inside a block (program 0 is fine)."""

    def kernel(x_ref, o_ref):
        start = pl.program_id(0) * block
        o_ref[...] = 2.0 * x_ref[pl.ds(start, block)]  # marker: array offset

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((n,), jnp.float32),
        grid=(n // block,),
        in_specs=[pl.BlockSpec((block,), lambda i: (i,))],
        out_specs=pl.BlockSpec((block,), lambda i: (i,)),
    )


def test_a_dynamic_slice_past_its_block_is_reported_for_every_program():
    fn, x = program_offset_into_block(), jnp.arange(512.0)
    inspection = pallaslab.inspect(fn, x)
    result = inspection.run(x, ref=lambda x: 2 * x)
    # JAX clamps the slice back into the block: on CPU it "matches" ...
    assert result.mode == "emulated" and result.comparison.ok
    np.testing.assert_array_equal(pallaslab.emulate(fn, interpret=True)(x), 2 * x)
    # ... but every program past the first reads outside its block.
    (found,) = result.out_of_bounds
    assert (found.ref, found.access, found.cause) == ("x_ref", "load", "clamped-slice")
    assert found.programs == ((1,), (2,), (3,)) and found.program_count == 3
    assert found.shape == (128,) and found.span == ((128, 255),)  # program 1: 128..255
    assert found.location.file == __file__
    assert found.location.line == line_of("marker: array offset")
    assert "reaches elements 128..255, outside x_ref (128), in programs (1,), (2,), (3,)" in (
        found.describe()
    )
    # The NumPy interpreter agrees, program by program.
    for program in range(4):
        load, _ = inspection.accesses(0, (program,)).accesses
        outside = int(load.outside((128,)).sum())
        assert outside == (0 if program == 0 else 128), program
        if program:
            assert (int(load.coords[0].min()), int(load.coords[0].max())) == (
                128 * program,
                128 * program + 127,
            )


def test_stores_past_their_block_name_the_store_and_only_the_programs_that_do_it():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        o_ref[pl.ds(pl.program_id(0) * 64, 64)] = jnp.zeros((64,))  # marker: store

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((512,), jnp.float32),
        grid=(4,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    x = jnp.arange(512.0)
    (found,) = pallaslab.inspect(fn, x).run(x).out_of_bounds
    # Hand-computed: program p stores 64p..64p+63 into a block of 128: p = 2, 3 miss it.
    assert found.access == "store" and found.programs == ((2,), (3,))
    assert found.span == ((128, 191),) and found.location.line == line_of("marker: store")


CHUNK = 128


def chunked_sum():
    """Notebook 08's loop one step too far: one program, the fifth load past the end."""

    def kernel(x_ref, o_ref):
        def body(t, total):
            return total + jnp.sum(x_ref[pl.ds(t * CHUNK, CHUNK)])  # marker: chunk

        steps = x_ref.shape[0] // CHUNK + 1
        o_ref[...] = jnp.full(o_ref.shape, jax.lax.fori_loop(0, steps, body, 0.0))

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))


def test_a_loop_one_step_too_far_is_found_inside_the_loop():
    fn, x = chunked_sum(), jnp.ones(512)
    result = pallaslab.inspect(fn, x).run(x)
    np.testing.assert_array_equal(result.values[0], 640.0)  # the last chunk twice
    (found,) = result.out_of_bounds
    assert found.programs == ((),) and found.program_count == 1
    assert found.span == ((512, 639),)  # the fifth chunk, hand-computed
    assert found.location.line == line_of("marker: chunk")


def test_masked_lanes_enabled_outside_the_array_are_reported():
    n, block = 1000, 128

    def kernel(x_ref, o_ref):
        pid = pl.program_id(0)
        mask = pid * block + jnp.arange(block) <= n  # off by one
        x = pltriton.load(x_ref.at[pl.ds(pid * block, block)], mask=mask, other=0.0)
        pltriton.store(o_ref.at[pl.ds(pid * block, block)], x, mask=mask)  # marker: mask

    fn = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((n,), jnp.float32), grid=(pl.cdiv(n, block),)
    )
    x = jnp.arange(float(n))
    found = {o.access: o for o in pallaslab.inspect(fn, x).run(x).out_of_bounds}
    assert set(found) == {"load", "store"}
    for access in found.values():
        assert access.cause == "masked-lanes-outside" and access.programs == ((7,),)
        # Program 7's enabled lanes: 896 .. 1000 (lane 1000 is one past the end).
        assert access.span == ((896, 1000),)
    assert found["store"].location.line == line_of("marker: mask")


@pytest.mark.parametrize(
    "make",
    [corpus.seed_matmul, corpus.row_softmax, corpus.kacc_matmul, corpus.with_scratch],
    ids=lambda m: m.__name__,
)
def test_kernels_that_stay_inside_report_nothing(make):
    case = make()
    result = pallaslab.inspect(case.fn, *case.args).run(ref=case.reference)
    assert result.comparison.ok and result.out_of_bounds == ()
    assert not [n for n in result.notices if "not checked" in n], result.notices


def test_the_triton_style_masked_add_is_clean():
    fn, x = masked_add(), jnp.arange(1000.0)
    result = pallaslab.inspect(fn, x, x).run(x, x)
    assert result.out_of_bounds == () and result.leaks == ()


# ---------------------------------------------------------------------------
# Masked loads without other=.

N, B = 1000, 128


def block_sums(discard=False, store_masked=False):
    def kernel(x_ref, o_ref):
        pid = pl.program_id(0)
        mask = pid * B + jnp.arange(B) < N
        x = pltriton.load(x_ref.at[pl.ds(pid * B, B)], mask=mask)  # marker: no other
        if discard:
            x = jnp.where(mask, x, 0.0)
        if store_masked:
            pltriton.store(o_ref.at[pl.ds(pid * B, B)], 2.0 * x, mask=mask)
        else:
            o_ref[pid] = jnp.sum(x)

    size = N if store_masked else pl.cdiv(N, B)
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((size,), jnp.float32), grid=(pl.cdiv(N, B),)
    )


def test_a_masked_load_without_other_that_reaches_the_output_is_named():
    fn, x = block_sums(), jnp.ones(N)
    # Pallas' interpreter: the last block's masked-out lanes read NaN (past the end).
    interpreted = np.asarray(pallaslab.emulate(fn, interpret=True)(x))
    assert np.isnan(interpreted[7]) and not np.isnan(interpreted[:7]).any()
    result = pallaslab.inspect(fn, x).run(x, ref=lambda x: jnp.full((8,), 128.0).at[7].set(104))
    assert not result.comparison.ok
    (leak,) = result.leaks
    assert (leak.cause, leak.source, leak.output) == ("masked-load-without-other", "x_ref", "o_ref")
    assert leak.location.file == __file__ and leak.location.line == line_of("marker: no other")
    assert leak.elements == 1 and leak.nan_elements == 1  # only o[7], hand-computed
    assert "masked load from x_ref turns off (it has no other=)" in leak.describe()
    assert "Give the load other=" in leak.detail


def test_masked_out_lanes_that_never_reach_an_output_are_not_reported():
    x = jnp.ones(N)
    for fn in (block_sums(discard=True), block_sums(store_masked=True)):
        result = pallaslab.inspect(fn, x).run(x)
        assert result.leaks == (), result.leaks
        assert not np.isnan(result.values[0]).any()


def test_masked_out_lanes_inside_the_array_leak_too():
    # The mask picks positive values; the off lanes hold real (negative) data here,
    # which a GPU does not promise: the sum only matches by chance.
    def kernel(x_ref, o_ref):
        x = pltriton.load(x_ref.at[pl.ds(0, 256)], mask=x_ref[...] > 0)
        o_ref[...] = jnp.full((8,), jnp.sum(jnp.maximum(x, 0.0)))

    fn = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32))
    x = jnp.linspace(-1.0, 1.0, 256)
    result = pallaslab.inspect(fn, x).run(x, ref=lambda x: jnp.full((8,), jnp.maximum(x, 0).sum()))
    assert result.comparison.ok  # right here ...
    (leak,) = result.leaks  # ... for the wrong reason
    assert leak.cause == "masked-load-without-other" and leak.nan_elements == 0


# ---------------------------------------------------------------------------
# Where users see them: %%kernel, the Run tab, the text summary, exercise feedback.

CELL = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

def kernel(x_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[pl.ds(pl.program_id(0) * 128, 128)]

double = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((512,), jnp.float32), grid=(4,),
                        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
                        out_specs=pl.BlockSpec((128,), lambda i: (i,)))

def sums(x):
    def sum_kernel(x_ref, o_ref):
        pid = pl.program_id(0)
        mask = pid * 128 + jnp.arange(128) < x.shape[0]
        o_ref[pid] = jnp.sum(pltriton.load(x_ref.at[pl.ds(pid * 128, 128)], mask=mask))
    return pl.pallas_call(sum_kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32),
                          grid=(8,))(x)
x = jnp.arange(512.0)
"""


def cell_line(text):
    """The line of `text` in a `%%kernel` cell made of the magic line and CELL."""
    (index,) = [k for k, line in enumerate(CELL.splitlines()) if text in line]
    return index + 2


def test_kernel_cells_show_out_of_bounds_slices_and_undefined_lanes(ip):
    from pallaslab._src.views.inspector import Inspector

    result = ip.run_cell(f'%%kernel double(x) --ref "lambda x: 2 * x"\n{CELL}')
    assert result.success, result.error_in_exec
    inspection = ip.user_ns["_kernel"]
    assert inspection.result.comparison.ok
    run = Inspector(inspection).panes.get("run") or run_tab.payload(inspection)
    (found,) = run["result"]["outOfBounds"]
    assert found["where"]["line"] == cell_line("2.0 * x_ref[pl.ds(")
    assert found["where"]["label"].startswith("Cell")
    assert found["programs"] == [[1], [2], [3]] and found["programCount"] == 3
    html = static_tab(inspection, "run")
    assert "Out of bounds — Cell" in html and f"line {found['where']['line']}:" in html
    assert "out of bounds: double" not in summary_text(inspection)
    assert "out of bounds: kernel: a load from x_ref" in summary_text(inspection)

    ip.run_cell("y = jnp.ones(1000)")
    result = ip.run_cell(f"%%kernel sums(y)\n{CELL}")
    assert result.success, result.error_in_exec
    run = run_tab.payload(ip.user_ns["_kernel"])["result"]
    (leak,) = run["leaks"]
    assert leak["title"] == "Undefined lanes" and leak["cause"] == "masked-load-without-other"
    assert leak["where"]["line"] == cell_line("o_ref[pid] = jnp.sum(pltriton.load(")
    assert "Undefined lanes — Cell" in static_tab(ip.user_ns["_kernel"], "run")


def test_exercises_do_not_pass_on_a_clamped_slice():
    def relu(x):
        def kernel(x_ref, o_ref):
            start = pl.program_id(0) * 128
            o_ref[...] = jnp.maximum(x_ref[pl.ds(start, 128)], 0.0)  # marker: relu slice

        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(x.shape[0] // 128,),
            in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
            out_specs=pl.BlockSpec((128,), lambda i: (i,)),
        )(x)

    feedback = pallaslab.exercise("00.relu", relu)
    assert not feedback and feedback.kind == "out-of-bounds"
    assert all(case.ok for case in feedback.cases)  # the values match ...
    assert feedback.message.startswith("The values match here, but only by chance")
    assert "outside x_ref (128)" in feedback.message
    assert feedback.location.endswith(f"line {line_of('marker: relu slice')}")
    assert "offset into the block" in feedback.hint


def test_exercises_name_a_masked_load_without_other():
    def row_sum(x):
        rows, cols = x.shape
        chunks = pl.cdiv(cols, 128)

        def kernel(x_ref, o_ref):
            def body(t, total):
                lanes = t * 128 + jnp.arange(128)
                chunk = pltriton.load(x_ref.at[pl.ds(t * 128, 128)], mask=lanes < cols)
                return total + jnp.sum(chunk)

            o_ref[...] = jax.lax.fori_loop(0, chunks, body, 0.0)

        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((rows,), x.dtype),
            grid=(rows,),
            in_specs=[pl.BlockSpec((None, cols), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((None,), lambda i: (i,)),
        )(x)

    feedback = pallaslab.exercise("03.chunked_sum", row_sum)
    assert not feedback and feedback.kind == "wrong-values"
    assert "masked load from x_ref turns off" in feedback.message
    assert "other=0.0" in feedback.hint
