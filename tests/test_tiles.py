"""Tile maps and element-level accesses of real kernels: the corpus and JAX's own ops."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.gpu import softmax as gpu_softmax
from jax.experimental.pallas.ops.tpu import matmul as tpu_matmul

import pallaslab
from pallaslab._src.geometry import merit
from pallaslab._src.geometry.tilemap import TileMap
from tests import corpus


def inspected(case):
    return pallaslab.inspect(case.fn, *case.args, **case.kwargs)


# --- tile maps ----------------------------------------------------------------------


def test_seed_matmul_a_block_is_rows_of_program_i_all_of_k():
    m, n, k = 256, 192, 128
    kernel = inspected(corpus.seed_matmul(m, n, k)).kernels[0]
    tiles = TileMap(kernel)
    bm, bn = corpus.BLOCK_M, corpus.BLOCK_N
    for i, j in tiles.programs():
        assert tiles.ranges(0, (i, j)) == ((i * bm, (i + 1) * bm), (0, k))
        assert tiles.ranges(1, (i, j)) == ((0, k), (j * bn, (j + 1) * bn))
        assert tiles.ranges(2, (i, j)) == ((i * bm, (i + 1) * bm), (j * bn, (j + 1) * bn))
    assert tiles.schedule == "gpu"  # Triton compiler params
    # Every program reads all of its rows of A: each element of A is read n / bn times.
    assert (tiles.read_counts(0) == n // bn).all()
    assert (tiles.read_counts(2) == 1).all()


def test_k_accumulating_matmul_revisits_its_output_k_over_bk_times():
    case = corpus.kacc_matmul(m=256, n=256, k=512, bk=128)
    tiles = inspected(case).tiles()
    assert tiles.grid == (2, 2, 4)
    assert (tiles.visits(2) == 512 // 128).all()
    assert tiles.revisit_axes(2) == (2,)
    assert tiles.schedule == "tpu"
    assert tiles.transfers(2) == 4  # written back once per block on TPU
    assert tiles.transfers(2, "gpu") == 16


def test_a_1000_vector_in_128_blocks_pads_the_last_block_by_24():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    fn = pl.pallas_call(
        kernel,
        out_shape=corpus.f32(1000),
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
    )
    inspection = pallaslab.inspect(fn, corpus.f32(1000))
    tiles = inspection.tiles()
    assert tiles.ranges(0, (7,)) == ((896, 1000),)
    assert tiles.padding(0, (7,)) == ((0, 24),)
    assert tiles.padding(1, (7,)) == ((0, 24),)
    assert all(tiles.padding(0, (i,)) == ((0, 0),) for i in range(7))
    assert (tiles.read_counts(0) == 1).all()
    # The body sees the padding: 24 lanes of program 7's block lie past the array.
    accesses = inspection.accesses(0, (7,))
    assert accesses.map(0).ref.shape == (128,)


def test_scalar_prefetch_uses_the_runs_values():
    case = corpus.scalar_prefetch()
    inspection = inspected(case)
    kernel = inspection.kernels[0]
    assert TileMap(kernel).operands[1].access == "unmapped"
    tiles = inspection.tiles()
    order = [7, 6, 5, 4, 3, 2, 1, 0]
    for i in range(8):
        assert tiles.ranges(1, (i,)) == ((order[i] * 8, order[i] * 8 + 8), (0, 128))
        assert tiles.ranges(2, (i,)) == ((i * 8, i * 8 + 8), (0, 128))
    explicit = TileMap(kernel, prefetch=(np.zeros(8, np.int32),))
    assert (explicit.read_counts(1)[:8] == 8).all() and explicit.transfers(1) == 1


def test_vmapped_kernel_gets_a_squeezed_batch_axis():
    tiles = inspected(corpus.vmapped()).tiles()
    assert tiles.grid == (3, 8)
    assert tiles.ranges(0, (2, 5)) == ((2, 3), (640, 768))


def test_jax_tpu_matmul_maps_as_computed_by_hand():
    x, y = corpus.f32(512, 1024), corpus.f32(1024, 256)
    bm, bn, bk = 128, 128, 256
    fn = functools.partial(tpu_matmul.matmul, block_shape=(bm, bn), block_k=bk)
    inspection = pallaslab.inspect(fn, x, y)
    tiles = inspection.tiles()
    assert tiles.grid == (512 // bm, 256 // bn, 1024 // bk)
    for i, j, k in tiles.programs():
        assert tiles.ranges(0, (i, j, k)) == ((i * bm, (i + 1) * bm), (k * bk, (k + 1) * bk))
        assert tiles.ranges(1, (i, j, k)) == ((k * bk, (k + 1) * bk), (j * bn, (j + 1) * bn))
        assert tiles.ranges(2, (i, j, k)) == ((i * bm, (i + 1) * bm), (j * bn, (j + 1) * bn))
    assert tiles.operands[3].access == "scratch"
    assert (tiles.visits(2) == 1024 // bk).all()
    figures = merit.kernel_merit(tiles)
    block = lambda r, c: r * c * 4  # noqa: E731
    assert figures.working_set_bytes == 2 * (block(bm, bk) + block(bk, bn) + block(bm, bn)) + block(
        bm, bn
    )
    # The dots, and the accumulator's add in every program.
    assert figures.flops == 2 * 512 * 256 * 1024 + 512 * 256 * (1024 // bk)


def test_jax_gpu_softmax_maps_one_row_per_program():
    x = corpus.f32(4, 8, 100)
    inspection = pallaslab.inspect(gpu_softmax.softmax, x)
    tiles = inspection.tiles()
    assert tiles.grid == (4, 8) and tiles.schedule == "gpu"
    for b, r in tiles.programs():
        assert tiles.ranges(0, (b, r)) == ((b, b + 1), (r, r + 1), (0, 100))
        assert tiles.ranges(1, (b, r)) == ((b, b + 1), (r, r + 1), (0, 100))
    assert (tiles.read_counts(0) == 1).all()


def test_save_png_and_svg(tmp_path):
    tiles = inspected(corpus.seed_matmul()).tiles()
    png = pallaslab.save_tiles(tiles, tmp_path / "matmul.png", program=(1, 2))
    svg = pallaslab.save_tiles(tiles, tmp_path / "matmul.svg", program=(1, 2))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "a_ref" in text and "[64:128, 128:192]" in text
    with pytest.raises(ValueError, match=r"\.png, \.svg"):
        pallaslab.save_tiles(tiles, tmp_path / "matmul.txt")
    with pytest.raises(IndexError, match="not in the grid"):
        pallaslab.save_tiles(tiles, tmp_path / "x.png", program=(9, 9))


# --- element-level accesses ---------------------------------------------------------


def test_softmax_masked_load_shows_masked_lanes():
    inspection = inspected(corpus.row_softmax(rows=4, cols=100))
    accesses = inspection.accesses(0, (2,))
    load, store = accesses.accesses
    assert (load.kind, load.primitive, store.kind) == ("read", "masked_load", "write")
    assert load.lanes == 128 and load.masked == 28
    assert load.mask[:100].all() and not load.mask[100:].any()
    x = accesses.map(accesses.ref_index(0))
    assert x.masked_lanes == 28 and x.outside_lanes == 0
    assert (x.reads[:100] == 1).all() and (x.reads[100:] == 0).all()
    assert (x.masked[100:] == 1).all() and x.untouched == 0
    assert x.origin == (0,) and x.inside[:100].all() and not x.inside[100:].any()
    assert load.line > 0 and load.file.endswith("corpus.py")


def test_seed_matmul_reads_each_element_once_through_ds_slices():
    inspection = inspected(corpus.seed_matmul())
    accesses = inspection.accesses(0, (1, 2))
    a_loads = [x for x in accesses.accesses if x.ref == 0]
    assert len(a_loads) == 4  # one 64 x 32 slice per iteration of the K loop
    assert [int(x.coords[1].min()) for x in a_loads] == [0, 32, 64, 96]
    a = accesses.map(0)
    assert (a.reads == 1).all() and a.untouched == 0 and a.read_twice == 0
    assert (accesses.map(2).writes == 1).all()


def test_k_accumulator_writes_twice_in_its_first_step():
    inspection = inspected(corpus.kacc_matmul())
    first = inspection.accesses(0, (0, 0, 0)).map(2)
    later = inspection.accesses(0, (0, 0, 1)).map(2)
    assert (first.writes == 2).all() and first.written_twice == 128 * 128
    assert (later.writes == 1).all() and (later.reads == 1).all()


def _strided_kernel(x_ref, o_ref):
    p = pl.program_id(0)
    a = x_ref[pl.ds(1, 4, stride=2), :]
    b = x_ref.at[2:6][pl.ds(1, 2), 3]
    c = x_ref.at[4:8][pl.ds(p + 2, 4), 0]  # two lanes past the block's end
    o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[0, :] = a[0] + b[0] + c[0]
    o_ref[pl.ds(2, 2), pl.ds(0, 4)] += 1.0

    def body(i, acc):
        return acc + x_ref[i, pl.ds(i, 2)].sum()

    o_ref[7, 7] = jax.lax.fori_loop(0, 3, body, 0.0)


def test_strides_chained_views_loops_and_out_of_bounds_lanes():
    fn = pl.pallas_call(_strided_kernel, out_shape=corpus.f32(8, 8), grid=(1,))
    accesses = pallaslab.inspect(fn, corpus.f32(8, 8)).accesses()
    assert accesses.complete and not accesses.notices
    reads = [x for x in accesses.accesses if x.ref == 0]
    strided, chained, beyond, *loop = reads
    assert strided.coords[0][:, 0].tolist() == [1, 3, 5, 7]
    assert [c.tolist() for c in chained.coords] == [[3, 4], [3, 3]]
    assert [c.tolist() for c in beyond.coords] == [[6, 7, 8, 9], [0, 0, 0, 0]]
    assert [[c.tolist() for c in x.coords] for x in loop] == [
        [[0, 0], [0, 1]],
        [[1, 1], [1, 2]],
        [[2, 2], [2, 3]],
    ]
    x = accesses.map(0)
    assert x.outside_lanes == 2 and x.reads.shape == (10, 8)
    assert x.read_twice == 4  # (1, 1), (1, 2), (3, 3), (7, 0)
    o = accesses.map(1)
    assert o.writes[2:4, :4].tolist() == [[2] * 4] * 2  # zeroed, then += (an update)
    assert o.writes[7, 7] == 2 and o.reads[2:4, :4].sum() == 8


def _gather_kernel(x_ref, o_ref):
    rows = x_ref[jax.lax.iota(jnp.int32, 3) * 2 + 1, :]  # rows 1, 3, 5
    cols = x_ref[1, jax.lax.broadcasted_iota(jnp.int32, (2, 2), 1) * 3]  # [[0, 3], [0, 3]]
    o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[0:3, :] = rows
    o_ref[3, 0] = cols.sum()


def test_integer_array_indexers_gather_lanes():
    fn = pl.pallas_call(_gather_kernel, out_shape=corpus.f32(8, 8))
    accesses = pallaslab.inspect(fn, corpus.f32(8, 8)).accesses()
    rows, cols = (a for a in accesses.accesses if a.ref == 0)
    assert rows.coords[0][:, 0].tolist() == [1, 3, 5] and rows.mask.shape == (3, 8)
    assert [c.tolist() for c in cols.coords] == [[[1, 1], [1, 1]], [[0, 3], [0, 3]]]
    x = accesses.map(0)
    assert x.reads[1, 0] == 3 and x.reads[1, 3] == 3 and x.read_twice == 2
    assert x.untouched == 64 - 3 * 8


def test_accesses_of_a_later_kernel_use_the_earlier_kernels_output():
    accesses = inspected(corpus.two_kernels()).accesses(1, (1,))
    assert not accesses.notices  # real inputs: kernel 0 ran (interpreted) to make them
    assert [a.kind for a in accesses.accesses] == ["read", "write"]


def test_accesses_of_a_scratch_buffer_and_its_reuse():
    accesses = inspected(corpus.with_scratch()).accesses(0, (1,))
    acc = accesses.map(2)
    assert acc.ref.role == "scratch"
    assert (acc.reads == 2).all() and (acc.writes == 2).all()


def test_mesh_kernels_map_their_copies_and_refuse_element_accesses_clearly():
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    @jax.jit
    def f(x):
        return plgpu.kernel(body, out_type=corpus.f32(256), grid=(2,), grid_names=("x",))(x)

    inspection = pallaslab.inspect(f, corpus.f32(256))
    tiles = inspection.tiles()
    # No BlockSpecs: the map is the body's copies. Each of the 2 CTAs loads all of x and
    # stores all of the output (one step each).
    assert tiles.grid == (2, 1)
    assert [t.access for t in tiles.operands] == ["pipelined", "pipelined"]
    assert (tiles.read_counts(0) == 2).all() and (tiles.read_counts(1) == 2).all()
    with pytest.raises(ValueError, match="pallas_call kernels"):
        inspection.accesses()
