"""Checking kernels against references: the corpus passes, planted bugs are located."""

from __future__ import annotations

import functools

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

import pallaslab
from pallaslab._src.geometry import mismatch
from pallaslab._src.records import Operand
from pallaslab._src.records.indexmap import IndexMap
from tests import corpus

BM = BN = BK = 32


def planted_matmul(bug_in_last_row: bool):
    """The seed matmul; with the bug, the last row of blocks stops one k tile short."""

    def kernel(a_ref, b_ref, c_ref, *, num_k_tiles):
        last = pl.num_programs(0) - 1
        trips = num_k_tiles - 1 if bug_in_last_row else num_k_tiles
        count = jnp.where(pl.program_id(0) == last, trips, num_k_tiles)
        acc = jnp.zeros((BM, BN), jnp.float32)

        def body(t, acc):
            k = pl.ds(t * BK, BK)
            a, b = pltriton.load(a_ref.at[:, k]), pltriton.load(b_ref.at[k, :])
            return acc + pltriton.dot(a, b).astype(jnp.float32)

        acc = jax.lax.fori_loop(0, count, body, acc)
        pltriton.store(c_ref, acc.astype(c_ref.dtype))

    @jax.jit
    def matmul(a, b):
        m, k = a.shape
        _, n = b.shape
        return pl.pallas_call(
            functools.partial(kernel, num_k_tiles=k // BK),
            out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
            grid=(m // BM, n // BN),
            in_specs=[
                pl.BlockSpec((BM, k), lambda i, j: (i, 0)),
                pl.BlockSpec((k, BN), lambda i, j: (0, j)),
            ],
            out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        )(a, b)

    return matmul


def f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


@pytest.mark.parametrize("make", corpus.ALL, ids=lambda f: f.__name__)
def test_the_corpus_passes(make):
    case = make()
    inspection = pallaslab.inspect(case.fn, *case.args, **case.kwargs)
    result = inspection.check(case.reference)
    assert result.ok, result.summary()
    assert result.bad_tiles == () and result.mismatched == 0
    assert result.max_abs_err <= result.points[0].comparison.atol + 1e-12
    # Every output was matched to the kernel that writes it, with a tiling.
    for tile in result.tiles:
        assert tile.kernel, tile.note
        assert not tile.counts.any()


def test_a_planted_off_by_one_in_the_last_row_of_blocks_is_located_exactly():
    inspection = pallaslab.inspect(planted_matmul(True), f32(128, 128), f32(128, 128))
    result = inspection.check(lambda a, b: a @ b)
    assert not result.ok
    expected = tuple((3, j) for j in range(4))
    assert result.bad_tiles == expected
    assert result.bad_programs == expected
    heat = result.heatmap
    assert heat.kernel == "kernel" and heat.operand == "c_ref" and heat.tile_shape == (32, 32)
    # The heatmap marks exactly those tiles, every element of each.
    marked = {tuple(int(v) for v in idx) for idx in np.argwhere(heat.counts > 0)}
    assert marked == set(expected)
    assert (heat.counts[3] == 32 * 32).all()
    assert heat.pattern == "the last row of blocks"
    assert "the last row of blocks" in result.summary()
    assert result.mismatched == 4 * 32 * 32
    assert result.max_abs_err > 1


def test_the_same_kernel_without_the_bug_passes():
    inspection = pallaslab.inspect(planted_matmul(False), f32(128, 128), f32(128, 128))
    assert inspection.check(lambda a, b: a @ b).ok


def test_a_wrong_last_element_marks_only_the_last_block():
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)
        ramp = jnp.arange(128)
        wrong = (i == pl.num_programs(0) - 1) & (ramp == 127)
        o_ref[...] = jnp.where(wrong, 0.0, x_ref[...] * 2.0)

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    result = pallaslab.check(fn, lambda x: x * 2.0, f32(1024))
    assert result.bad_tiles == ((7,),)
    assert result.heatmap.counts.tolist() == [0] * 7 + [1]
    assert result.heatmap.pattern == "the last block"
    assert result.mismatched == 1


def test_nan_and_inf_are_reported_as_such():
    def kernel(x_ref, o_ref):
        i = pl.program_id(0)
        x = x_ref[...]
        o_ref[...] = jnp.where(i == 2, jnp.nan, jnp.where(i == 3, jnp.inf, x))

    fn = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((512,), jnp.float32),
        grid=(4,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    result = pallaslab.check(fn, lambda x: x, f32(512))
    assert not result.ok
    assert result.nan_count == 128 and result.inf_count == 128
    assert result.bad_tiles == ((2,), (3,))
    assert result.heatmap.nonfinite.tolist() == [0, 0, 128, 128]
    assert "128 NaN, 128 Inf" in result.summary()
    assert np.isinf(result.max_abs_err)


def test_nan_in_both_output_and_reference_is_not_a_mismatch():
    errors = mismatch.element_errors(
        np.array([np.nan, 1.0, np.inf]), np.array([np.nan, 1.0, np.inf]), 1e-5, 1e-5
    )
    assert not errors.bad.any() and errors.reference_nonfinite == 2 and errors.nan_count == 0


def test_tolerances_fit_the_dtype():
    assert mismatch.tolerance_for("bfloat16")[0] > 100 * mismatch.tolerance_for("float32")[0]
    assert mismatch.tolerance_for("float8_e4m3fn")[0] >= 0.1
    assert mismatch.tolerance_for("int32") == (0.0, 0.0)
    # bf16 rounding passes in bf16 and fails when held to f32's tolerance.
    x = np.linspace(1, 2, 256, dtype=np.float32)
    rounded = x.astype(jnp.bfloat16)
    assert not mismatch.element_errors(
        rounded.astype(np.float32), x, *mismatch.tolerance_for("bfloat16")
    ).bad.any()
    assert mismatch.element_errors(
        rounded.astype(np.float32), x, *mismatch.tolerance_for("float32")
    ).bad.any()


def test_several_sizes_and_dtypes():
    case = corpus.seed_matmul(128, 128, 64)
    inspection = pallaslab.inspect(case.fn, *case.args)
    result = inspection.check(
        lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype),
        make_args=lambda n: (f32(n, 64), f32(64, n)),
        sizes=[64, 128],
        dtypes=["float32", "bfloat16"],
    )
    assert result.ok, result.summary()
    labels = [p.label for p in result.points]
    assert labels == [
        "size=64 · float32",
        "size=64 · bfloat16",
        "size=128 · float32",
        "size=128 · bfloat16",
    ]
    assert [p.args[0].dtype for p in result.points] == ["float32", "bfloat16"] * 2
    bf16 = result.points[1].comparison
    assert bf16.rtol == mismatch.tolerance_for("bfloat16")[0]
    # Inputs are seeded: the same check twice gives the same errors; another seed differs.
    first, second = (inspection.check(lambda a, b: a @ b, seed=1) for _ in range(2))
    values = lambda r: r.points[0].result.values[0]  # noqa: E731
    np.testing.assert_array_equal(values(first), values(second))
    assert not np.array_equal(values(first), values(inspection.check(lambda a, b: a @ b, seed=2)))


def test_a_reference_of_another_shape_is_a_problem_not_a_crash():
    case = corpus.blocked_add()
    result = pallaslab.check(case.fn, lambda x, y: (x + y)[:10], *case.args)
    assert not result.ok
    assert "shape" in result.points[0].comparison.problem
    assert np.isnan(result.max_abs_err)


def test_a_failing_reference_is_reported_per_point():
    case = corpus.blocked_add()

    def broken(x, y):
        raise RuntimeError("no reference today")

    result = pallaslab.check(case.fn, broken, *case.args)
    assert not result.ok
    assert "no reference today" in result.points[0].error


def test_a_value_reference_fits_one_set_of_inputs_only():
    case = corpus.blocked_add()
    with pytest.raises(ValueError, match="callable"):
        pallaslab.check(case.fn, np.zeros(1024), *case.args, dtypes=["float32", "bfloat16"])


def test_an_output_computed_after_the_kernel_uses_its_blocks_and_says_so():
    add = corpus.blocked_add().fn

    @jax.jit
    def program(x, y):
        return add(x, y) * 1.0 + jnp.where(jnp.arange(1024) >= 1000, 1.0, 0.0)

    result = pallaslab.check(program, lambda x, y: x + y, f32(1024), f32(1024))
    heat = result.heatmap
    assert heat.kernel == "add_kernel"
    assert "not returned by a kernel as is" in heat.note
    assert result.bad_tiles == ((7,),)


def test_scalar_prefetch_index_maps_name_their_programs():
    case = corpus.scalar_prefetch()
    inspection = pallaslab.inspect(case.fn, *case.args)

    def off_by_one_block(order, x):
        out = case.reference(order, x)
        return out.at[8:16].add(1.0)  # block 1 of the output

    result = inspection.check(off_by_one_block)
    assert result.bad_tiles == ((1, 0),)
    assert result.bad_programs == ((1,),)


# --- pure tile geometry -----------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    mask=hnp.arrays(bool, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9)),
    data=st.data(),
)
def test_per_tile_counts_match_brute_force(mask, data):
    tile = tuple(data.draw(st.integers(1, 4)) for _ in mask.shape)
    counts = mismatch.per_tile(mask, tile)
    for index in np.ndindex(counts.shape):
        window = tuple(slice(i * t, (i + 1) * t) for i, t in zip(index, tile, strict=True))
        assert counts[index] == mask[window].sum()
    assert counts.sum() == mask.sum()


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_bad_programs_match_brute_force_for_a_transposed_index_map(data):
    gi, gj = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    bm, bn = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    shape = (gj * bm, gi * bn)
    mask = data.draw(hnp.arrays(bool, shape))
    # Program (i, j) writes block (j, i): the programs differ from the tiles.
    transpose = pallaslab.inspect(
        pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...]),
            out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
            grid=(gi, gj),
            in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (j, i))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j: (j, i)),
        ),
        f32(*shape),
    )
    operand: Operand = transpose.kernels[0].outputs[0]
    assert isinstance(operand.index_map, IndexMap)
    errors = mismatch.element_errors(mask.astype(np.float32), np.zeros(shape, np.float32), 0.0, 0.0)
    found = mismatch.locate(errors, output="out", operand=operand, grid=(gi, gj))
    expected = tuple(
        (i, j)
        for i in range(gi)
        for j in range(gj)
        if mask[j * bm : (j + 1) * bm, i * bn : (i + 1) * bn].any()
    )
    assert found.bad_programs == expected
    assert set(found.bad_tiles) == {(j, i) for i, j in expected}


@pytest.mark.parametrize(
    ("bad", "tiles_shape", "words"),
    [
        ([(3, 0), (3, 1), (3, 2)], (4, 3), "the last row of blocks"),
        ([(0, 1), (1, 1)], (2, 2), "the last column of blocks"),
        ([(0, 0), (0, 1)], (3, 2), "the first row of blocks"),
        ([(1, 2)], (3, 3), "block (1, 2)"),
        ([(6,), (7,)], (8,), "the last 2 blocks (6..7)"),
        ([(0,)], (8,), "the first block"),
        ([(0, 0), (1, 1)], (2, 2), "2 of 4 blocks"),
        ([(0,), (1,)], (2,), "every block"),
        ([], (4,), ""),
    ],
)
def test_describe(bad, tiles_shape, words):
    assert mismatch.describe(bad, tiles_shape) == words
