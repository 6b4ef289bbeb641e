"""The classes of problems JAX's own Pallas tests found in pallaslab, each with kernels of ours.

Each class was fixed at its root; each test runs a kernel of its class through the
path that failed (tracing, the emulator, its checks, races, the sanitizer) and checks
the answer against an independent oracle: Pallas' interpret mode, a hand-computed
figure, or the semantics JAX's documentation gives.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallaslab
from pallaslab._src.core import sanitizer
from pallaslab._src.core.checking.outputs import differs
from pallaslab._src.core.emulator import fill_value
from pallaslab._src.core.sanitizer import decisions


def _interpreted(fn, *args):
    """The oracle: the same call in Pallas' interpret mode."""
    return jax.tree_util.tree_map(np.asarray, fn(*args, interpret=True))


# -- 0-d (scalar) operands ---------------------------------------------------------------


def _scale(x, s, interpret=False):
    def kernel(x_ref, s_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[...]

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret
    )(x, s)


def _constant(interpret=False):
    def kernel(o_ref):
        o_ref[...] = jnp.float32(1.5)

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((), jnp.float32), interpret=interpret
    )()


def test_0d_operands_trace_run_and_check_like_interpret_mode():
    x, s = jnp.arange(8.0), jnp.float32(3.0)
    inspection = pallaslab.inspect(_scale, x, s)
    assert inspection.kernels[0].operands[1].shape == ()
    assert inspection.kernels[0].operands[1].block_shape == ()
    result = inspection.run()
    assert result.mode == "emulated"
    np.testing.assert_array_equal(result.values[0], _interpreted(_scale, x, s))
    scalar = pallaslab.inspect(_constant).run()
    assert scalar.mode == "emulated" and scalar.leaks == ()
    np.testing.assert_array_equal(scalar.values[0], _interpreted(_constant))


# -- dtypes NumPy calls "V" (bfloat16, float8, int4) -----------------------------------


def _halve_padded(x, interpret=False):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    spec = pl.BlockSpec((16,), lambda i: (i,))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(x.shape[0], 16),),
        in_specs=[spec],
        out_specs=spec,
        interpret=interpret,
    )(x)


@pytest.mark.parametrize("dtype", [jnp.int4, jnp.bfloat16, jnp.float8_e4m3fn])
def test_narrow_dtypes_pad_and_compare_like_interpret_mode(dtype):
    x = (jnp.arange(24) % 7).astype(dtype)  # 24 of 32: the last block is padded
    result = pallaslab.inspect(_halve_padded, x).run()
    assert not [n for n in result.notices if "failed" in n], result.notices
    np.testing.assert_array_equal(
        result.values[0].astype(np.float32), _interpreted(_halve_padded, x).astype(np.float32)
    )


def test_nan_equals_nan_in_bfloat16():
    a = np.array([np.nan, 1.0], jnp.bfloat16)
    assert not differs(a, a.copy()).any()
    assert differs(a, np.array([np.nan, 2.0], jnp.bfloat16)).tolist() == [False, True]


# -- scalar prefetch under jax_numpy_rank_promotion='raise' ------------------------------


def _gather_rows(s, x, interpret=False):
    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + s_ref[pl.program_id(0)].astype(jnp.float32)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, s: (s[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s: (i, 0)),
        ),
        interpret=interpret,
    )(s, x)


def test_scalar_prefetch_checks_under_strict_rank_and_dtype_promotion():
    s = jnp.array([3, 2, 1, 0], jnp.int32)
    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape(32, 128)
    with jax.numpy_rank_promotion("raise"), jax.numpy_dtype_promotion("strict"):
        result = pallaslab.inspect(_gather_rows, s, x).run()
        expected = _interpreted(_gather_rows, s, x)
    assert result.mode == "emulated"
    assert not [n for n in result.notices if "not checked" in n or "failed" in n]
    np.testing.assert_array_equal(result.values[0], expected)


# -- a grid sized at run time ------------------------------------------------------------


def _double(x, n):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((8,), lambda i: (i,))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n,),
        in_specs=[spec],
        out_specs=spec,
    )(x)


def test_a_grid_sized_by_a_value_is_sized_from_the_example_inputs():
    inspection = pallaslab.inspect(_double, jnp.arange(32.0), jnp.int32(4))
    assert inspection.kernels[0].grid == (-1,)  # as bound: the size is an operand
    assert inspection.races(0, "gpu") == []  # no longer "grid sizes must not be negative"
    assert inspection.tiles(0).kernel.grid == (4,)  # 32 elements / blocks of 8, by hand


def test_a_grid_size_that_cannot_be_evaluated_is_said_in_words():
    def looped(x, n):
        return jax.lax.fori_loop(0, 1, lambda _, y: _double(y, n), x)

    inspection = pallaslab.inspect(looped, jnp.arange(32.0), jnp.int32(4))
    with pytest.raises(ValueError, match=r"grid axis 0 is sized at run time .* inside a loop"):
        inspection.races(0, "gpu")


# -- pl.Buffered(..., revisit=pl.RevisitMode.ANY) ----------------------------------------


def _accumulate_revisiting(x, revisit):
    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...]

    mode = {} if revisit is None else {"pipeline_mode": pl.Buffered(2, revisit=revisit)}
    # Axis 0 (the reduction) is outermost: each output block is left and revisited.
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        grid=(3, 2),
        in_specs=[pl.BlockSpec((None, 8, 128), lambda i, j: (i, j, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (j, 0), **mode),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary")),
    )(x)


@pytest.mark.skipif(
    not hasattr(pl, "RevisitMode") or "revisit" not in pl.Buffered.__dataclass_fields__,
    reason="this JAX has no pl.RevisitMode",
)
def test_revisit_any_makes_revisiting_an_output_block_legal_on_tpu():
    x = jnp.ones((3, 16, 128))
    plain = pallaslab.inspect(lambda x: _accumulate_revisiting(x, None), x)
    any_ = pallaslab.inspect(lambda x: _accumulate_revisiting(x, pl.RevisitMode.ANY), x)
    # JAX's docs: by default a block may only be revisited by the next program; ANY
    # restores it from memory at any later step.
    assert {c.kind for c in plain.races(0, "tpu")} == {"revisit"}
    assert any_.races(0, "tpu") == []
    assert any_.kernels[0].operands[-1].revisit == "any"
    tpu = {c.backend: c for c in any_.run().race_checks}
    assert "tpu" not in tpu
    assert {c.backend: c.confirmed for c in plain.run().race_checks}["tpu"] is True


# -- an SMEM output left mostly unwritten -------------------------------------------------


def _first_only(x):
    def kernel(x_ref, o_ref):
        o_ref[0] = jnp.sum(x_ref[...])  # the store: only element 0

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8,), jnp.float32),
        grid=(1,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
    )(x)


def test_a_partly_written_smem_output_is_named_as_such_at_its_store():
    (leak,) = pallaslab.inspect(_first_only, jnp.ones((8, 128))).run().leaks
    assert leak.cause == "never-written"
    assert leak.elements == 7  # elements 1..7 of 8, by hand
    assert "No program stores them" in leak.detail
    assert "reads its block" not in leak.detail
    source = _first_only.__code__
    store_line = source.co_firstlineno + 2
    assert leak.location is not None and leak.location.line == store_line


def _one_row_per_block(order, x):
    def kernel(order_ref, x_ref, o_ref):
        o_ref[pl.ds(0, 1), :] = x_ref[pl.ds(0, 1), :]  # the store: one row of 8

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, order: (order[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, order: (order[i], 0)),
        ),
    )(order, x)


def test_a_block_chosen_by_scalar_prefetch_and_partly_stored_is_named_at_its_store():
    order = jnp.array([1, 0], jnp.int32)
    (leak,) = pallaslab.inspect(_one_row_per_block, order, jnp.ones((16, 128))).run().leaks
    # By hand: the blocks (rows 8..15, then 0..7) cover all 16 rows; each program
    # stores the first row of its block, leaving 7 rows of 128 in each unwritten.
    assert leak.cause == "never-written"
    assert leak.elements == 2 * 7 * 128
    assert "blocks of o_ref cover them, but no program stores them" in leak.detail
    store_line = _one_row_per_block.__code__.co_firstlineno + 2
    assert leak.location is not None and leak.location.line == store_line


# -- an input aliased to an output, read after another program wrote it ----------------


def _transpose_in_place(x, mapped):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct.like(x),
        grid=(4, 4),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), mapped),
        input_output_aliases={0: 0},
    )(x)


def test_reading_an_aliased_input_another_program_wrote_is_a_hazard():
    x = jnp.zeros((32, 512))
    swapped = pallaslab.inspect(lambda x: _transpose_in_place(x, lambda i, j: (j, i)), x)
    same = pallaslab.inspect(lambda x: _transpose_in_place(x, lambda i, j: (i, j)), x)
    # Program (i, j) reads block (i, j), which program (j, i) writes: on TPU (grid
    # order) that is earlier when j < i, 6 of the 16 blocks; on GPU any i != j, 12.
    assert [c.kind for c in swapped.races(0, "tpu")] == ["aliased-read"] * 6
    assert len(swapped.races(0, "gpu")) == 12
    assert same.races(0, "tpu") == [] and same.races(0, "gpu") == []


def test_an_aliased_input_the_body_never_reads_is_no_hazard():
    # Its memory is only passed along to the output (a buffer donated in place): the
    # swapped writes cannot be read back, whatever order the programs run in.
    def kernel(x_ref, o_ref):
        del x_ref
        o_ref[...] = jnp.ones_like(o_ref)

    def fill(x):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct.like(x),
            grid=(4, 4),
            in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((8, 128), lambda i, j: (j, i)),
            input_output_aliases={0: 0},
        )(x)

    inspection = pallaslab.inspect(fill, jnp.zeros((32, 512)))
    assert inspection.kernels[0].unused == (0,)
    assert inspection.races(0, "tpu") == [] and inspection.races(0, "gpu") == []


def _accumulate_in_place(x, steps, interpret=False):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    whole = pl.BlockSpec(x.shape, lambda i: (0, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct.like(x),
        grid=(steps,),
        in_specs=[whole],
        out_specs=whole,
        input_output_aliases={0: 0},
        interpret=interpret,
    )(x)


def test_an_aliased_block_kept_in_place_is_read_once_on_tpu():
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    # Oracle: Pallas' TPU interpreter models the pipeline's copies: the input block,
    # the same at every step, is copied in once, before the first step wrote anything.
    modelled = _accumulate_in_place(x, 4, interpret=pltpu.InterpretParams())
    np.testing.assert_array_equal(np.asarray(modelled), np.asarray(x) + 1)
    inspection = pallaslab.inspect(lambda x: _accumulate_in_place(x, 4), x)
    assert [c.kind for c in inspection.races(0, "tpu") if c.kind == "aliased-read"] == []
    # On a GPU the four programs run at once: each may read another's result.
    assert "aliased-read" in {c.kind for c in inspection.races(0, "gpu")}


# -- the sanitizer: the test's configuration, the TPU interpreter's settings -------------


def _add_one(x, interpret=True):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret
    )(x)


def test_the_sanitizer_checks_a_kernel_in_the_configuration_it_ran_in():
    checker = sanitizer.Sanitizer()
    assert checker.install() is None
    try:
        with jax.enable_x64(True):
            got = _add_one(jnp.arange(8, dtype=jnp.int64))
            assert got.dtype == jnp.int64
        (call,) = checker.finish()  # after the block: x64 is off again
    finally:
        checker.uninstall()
    assert call.status == "checked", call.reason
    assert call.agrees is True and call.findings == ()


def _count_steps(steps):
    def kernel(o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += 1

    return pl.pallas_call(
        kernel,
        grid=(steps,),
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        interpret=True,
    )()


def _sanitized_races(hardware):
    checker = sanitizer.Sanitizer(sanitizer.SanitizerOptions(hardware=frozenset(hardware)))
    checker.install()
    try:
        got = _count_steps(4)
        (call,) = checker.finish()
    finally:
        checker.uninstall()
    # Oracle: the grid run in order (Pallas' interpreter, a TPU) counts its 4 steps.
    np.testing.assert_array_equal(np.asarray(got), np.full((8, 128), 4.0, np.float32))
    assert call.status == "checked" and call.agrees is True, call.reason
    return {(f.kind, f.backend) for f in call.findings}


def test_race_rules_follow_the_hardware_the_suite_is_for():
    # An accumulator revisited along the grid, a kernel that names no backend: legal on
    # a TPU (one core runs the grid in order), a race on a GPU (programs run at once).
    assert ("race", "gpu") in _sanitized_races(("gpu", "tpu"))
    assert _sanitized_races(("tpu",)) == set()
    assert ("race", "gpu") in _sanitized_races(("gpu",))


def test_the_hardware_option_is_parsed():
    from pallaslab._src import pytest_plugin

    assert pytest_plugin.parse_hardware("TPU") == ("tpu",)
    assert pytest_plugin.parse_hardware("tpu, gpu") == ("gpu", "tpu")
    with pytest.raises(pytest.UsageError, match="choose gpu, tpu"):
        pytest_plugin.parse_hardware("cuda")


def test_mosaic_gpu_kernels_in_jaxs_interpreter_are_reached_and_checked_there():
    interpret = pytest.importorskip("jax._src.pallas.mosaic_gpu.interpret.params")
    plgpu = pytest.importorskip("jax.experimental.pallas.mosaic_gpu")

    def kernel(o_ref):
        thread = jax.lax.axis_index("x")
        o_ref[thread] = thread

    threads = plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct((4,), jnp.int32),
        num_threads=4,
        thread_name="x",
        interpret=interpret.InterpretGPUParams(),
    )
    checker = sanitizer.Sanitizer()
    checker.install()
    try:
        got = jax.jit(threads)()
        calls = checker.finish()
    finally:
        checker.uninstall()
    # Oracle: each of the 4 threads stores its own index (JAX's interpreter ran it).
    np.testing.assert_array_equal(np.asarray(got), np.arange(4))
    (call,) = calls
    assert (call.status, call.agrees, call.findings) == ("checked", True, ())
    assert "checked in JAX's Mosaic GPU interpreter" in call.notes[0]


def test_kernels_without_an_interpreter_keep_jaxs_error_while_observed():
    checker = sanitizer.Sanitizer()
    checker.install()
    try:
        with pytest.raises(Exception, match="Only interpret mode is supported on CPU"):
            _add_one(jnp.arange(8.0), interpret=False)
    finally:
        checker.finish()
        checker.uninstall()


def test_tpu_interpreter_settings_that_compute_otherwise_are_not_compared():
    plain = {"interpret": pltpu.InterpretParams()}
    cores = {"interpret": pltpu.InterpretParams(num_cores_or_threads=2)}
    zeros = {"interpret": pltpu.InterpretParams(uninitialized_memory="zero")}
    assert decisions.comparison_refusal(plain) == ""
    assert decisions.comparison_refusal({"interpret": True}) == ""
    assert "run on 2 cores" in decisions.comparison_refusal(cores)
    assert "fill uninitialized memory with zero" in decisions.comparison_refusal(zeros)


# -- negative array indices -------------------------------------------------------------


def _gather_rows_by(x, rows, shift):
    def kernel(x_ref, rows_ref, o_ref):
        o_ref[...] = x_ref[rows_ref[...] + shift, ::3]

    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((rows.shape[0], 3, 3), jnp.float32)
    )(x, rows)


def test_negative_array_indices_count_from_the_end_as_in_numpy():
    x = jnp.arange(6 * 8 * 3, dtype=jnp.float32).reshape(6, 8, 3)
    rows = jnp.array([1, 0, 2, 2, -1, 1], jnp.int32)
    wrapped = pallaslab.inspect(lambda x, r: _gather_rows_by(x, r, 0), x, rows).run()
    # NumPy's (and JAX's gather's) x[-1] is the last row: inside the ref.
    assert wrapped.out_of_bounds == ()
    np.testing.assert_array_equal(wrapped.values[0], np.asarray(x)[np.asarray(rows), ::3])
    beyond = pallaslab.inspect(lambda x, r: _gather_rows_by(x, r, -7), x, rows).run()
    (access,) = beyond.out_of_bounds  # -8 is no row of 6, even counting from the end
    assert access.ref == "x_ref" and access.span[0][0] < 0


def _block_totals(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.full((1,), jnp.sum(x_ref[...].astype(jnp.int32)), jnp.int32)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((2,), jnp.int32),
        grid=(2,),
        in_specs=[pl.BlockSpec((16,), lambda i: (i,))],
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
    )(x)


@pytest.mark.parametrize("dtype", [jnp.uint4, jnp.int4, jnp.int2])
def test_padding_of_narrow_integers_is_found_leaking(dtype):
    # The padding filler and the check's other filler must differ for every dtype.
    assert fill_value(dtype, "alt") != fill_value(dtype, "")
    x = jnp.ones((24,), dtype)  # 24 of 32: the second block has 8 elements of padding
    (leak,) = pallaslab.inspect(_block_totals, x).run().leaks
    assert leak.cause == "padding" and leak.tiles == ((1,),)
