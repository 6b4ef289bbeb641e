"""Tile maps and figures of merit: pure geometry, checked against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pallaslab._src.geometry import merit
from pallaslab._src.geometry.tilemap import TileMap, schedule_of
from pallaslab._src.records import CostEstimate, KernelWork, Operand
from pallaslab._src.records import indexmap as ix
from tests import records

LETTERS = "ijkl"


def operand(shape, block, outputs, *, kinds=None, grid_rank=1, role="in", position=0, **extra):
    return records.operand(
        shape,
        block,
        outputs,
        names=LETTERS[:grid_rank],
        kinds=kinds,
        role=role,
        position=position,
        **extra,
    )


kernel = records.kernel


def g(k):
    return ix.arg(k, LETTERS[k])


# --- brute force: one program at a time -------------------------------------------


def brute_blocks(op, grid):
    """{program: ((start, stop) per dim)} evaluating the index map one program at a time."""
    blocks = {}
    padding = op.element_padding or ((0, 0),) * len(op.shape)
    for program in itertools.product(*(range(n) for n in grid)):
        env = [np.asarray(p) for p in program]
        spans = []
        for expr, size_expr, kind, block, (low, _) in zip(
            op.index_map.outputs,
            op.index_map.sizes or (None,) * len(op.shape),
            op.block_kinds,
            op.block_shape,
            padding,
            strict=True,
        ):
            value = int(expr.evaluate(env))
            extent = 1 if block is None else block
            start = value * extent if kind == "blocked" else value - low
            if size_expr is not None:
                extent = max(0, min(int(size_expr.evaluate(env)), extent))
            spans.append((start, start + extent))
        blocks[program] = tuple(spans)
    return blocks


def clip(spans, shape):
    return tuple(
        (min(max(a, 0), n), min(max(b, 0), n)) for (a, b), n in zip(spans, shape, strict=True)
    )


def brute_counts(op, grid):
    counts = np.zeros(op.shape, dtype=np.int64)
    for spans in brute_blocks(op, grid).values():
        counts[tuple(slice(a, b) for a, b in clip(spans, op.shape))] += 1
    return counts


def brute_transfers(op, grid, schedule):
    count = elements = 0
    previous = None
    for spans in brute_blocks(op, grid).values():
        size = math.prod(b - a for a, b in clip(spans, op.shape))
        if size and (schedule == "gpu" or spans != previous):
            count += 1
            elements += size
        previous = spans
    return count, elements


# --- strategies ---------------------------------------------------------------------


@st.composite
def index_expr(draw, grid_rank):
    """An index-map output: affine in one grid index, maybe wrapped, or a constant."""
    if grid_rank == 0 or draw(st.integers(0, 4)) == 0:
        return ix.const(draw(st.integers(-1, 3)))
    k = draw(st.integers(0, grid_rank - 1))
    expr = ix.apply(
        "add",
        ix.apply("mul", g(k), ix.const(draw(st.integers(0, 2)))),
        ix.const(draw(st.integers(-1, 2))),
    )
    if draw(st.booleans()):
        expr = ix.apply("mod", expr, ix.const(draw(st.integers(1, 3))))
    if draw(st.booleans()) and grid_rank > 1:
        other = (k + 1) % grid_rank
        expr = ix.apply("add", expr, g(other))
    return expr


@st.composite
def kernels(draw):
    grid_rank = draw(st.integers(0, 3))
    grid = tuple(draw(st.lists(st.integers(1, 4), min_size=grid_rank, max_size=grid_rank)))
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 12), min_size=rank, max_size=rank)))
    kinds = draw(
        st.lists(
            st.sampled_from(["blocked", "blocked", "squeezed", "element", "bounded"]),
            min_size=rank,
            max_size=rank,
        )
    )
    block = tuple(None if k == "squeezed" else draw(st.integers(1, 6)) for k in kinds)
    outputs = [draw(index_expr(grid_rank)) for _ in range(rank)]
    padding = ()
    if "element" in kinds and draw(st.booleans()):
        padding = tuple(
            (draw(st.integers(0, 2)), draw(st.integers(0, 2))) if k == "element" else (0, 0)
            for k in kinds
        )
    sizes = ()
    if "bounded" in kinds:
        sizes = tuple(
            (
                draw(index_expr(grid_rank))
                if draw(st.booleans())
                else ix.const(draw(st.integers(0, 6)))
            )
            if k == "bounded"
            else None
            for k in kinds
        )
    op = operand(
        shape,
        block,
        outputs,
        kinds=kinds,
        grid_rank=grid_rank,
        element_padding=padding,
        sizes=sizes,
    )
    return kernel(grid, op)


# --- properties ---------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(kernels())
def test_tile_maps_agree_with_brute_force(k):
    tiles = TileMap(k)
    op = k.operands[0]
    blocks = brute_blocks(op, k.grid)
    for program, spans in blocks.items():
        assert tiles.block(0, program) == spans
        assert tiles.ranges(0, program) == clip(spans, op.shape)
        for (lo, hi), (before, after), n in zip(
            spans, tiles.padding(0, program), op.shape, strict=True
        ):
            outside = (
                sum(1 for x in range(lo, hi) if x < 0),
                sum(1 for x in range(lo, hi) if x >= n),
            )
            assert (before, after) == outside
    np.testing.assert_array_equal(tiles.read_counts(0), brute_counts(op, k.grid))
    for schedule in ("tpu", "gpu"):
        count, elements = brute_transfers(op, k.grid, schedule)
        assert tiles.transfers(0, schedule) == count, schedule
        assert tiles.operand_hbm_bytes(0, schedule) == elements * 4, schedule
    visits = tiles.visits(0)
    for program, spans in blocks.items():
        assert visits[program] == sum(1 for other in blocks.values() if other == spans)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=3),
    st.lists(st.integers(1, 8), min_size=3, max_size=3),
)
def test_blocks_of_a_dividing_shape_partition_the_array(blocks_per_dim, block_sizes):
    rank = len(blocks_per_dim)
    block = tuple(block_sizes[:rank])
    shape = tuple(b * n for b, n in zip(block, blocks_per_dim, strict=True))
    op = operand(shape, block, [g(k) for k in range(rank)], grid_rank=rank)
    tiles = TileMap(kernel(blocks_per_dim, op))
    counts = tiles.read_counts(0)
    assert counts.shape == shape and (counts == 1).all()
    assert tiles.transfers(0) == math.prod(blocks_per_dim)
    assert tiles.hbm_bytes() == tiles.min_hbm_bytes() == op.nbytes


@settings(max_examples=60, deadline=None)
@given(kernels())
def test_read_counts_sum_to_the_elements_blocks_hold(k):
    tiles = TileMap(k)
    op = k.operands[0]
    total = sum(math.prod(b - a for a, b in tiles.ranges(0, p)) for p in tiles.programs())
    assert int(tiles.read_counts(0).sum()) == total == tiles.coverage(0).total
    # With every block inside the array, that is programs x block size.
    if all(sum(tiles.padding(0, p), ()) == (0,) * 2 * len(op.shape) for p in tiles.programs()):
        sizes = {math.prod(b - a for a, b in tiles.block(0, p)) for p in tiles.programs()}
        if len(sizes) == 1:
            assert total == tiles.num_programs * sizes.pop()


# --- examples the issue names -------------------------------------------------------


def test_a_1000_vector_in_128_blocks_pads_the_last_by_24():
    op = operand((1000,), (128,), [g(0)])
    tiles = TileMap(kernel((8,), op))
    assert tiles.ranges(0, (7,)) == ((896, 1000),)
    assert tiles.padding(0, (7,)) == ((0, 24),)
    assert tiles.padding(0, (6,)) == ((0, 0),)
    assert (tiles.read_counts(0) == 1).all()
    assert tiles.operand_hbm_bytes(0) == 4000  # padding is not read


def test_k_accumulator_output_is_revisited_k_over_bk_times():
    m = n = 256
    kk = 512
    bm = bn = 128
    bk = 128
    x = operand((m, kk), (bm, bk), [g(0), g(2)], grid_rank=3)
    y = operand((kk, n), (bk, bn), [g(2), g(1)], grid_rank=3, position=1)
    o = operand((m, n), (bm, bn), [g(0), g(1)], grid_rank=3, role="out", position=2)
    k = kernel(
        (m // bm, n // bn, kk // bk),
        x,
        y,
        o,
        dimension_semantics=("parallel", "parallel", "arbitrary"),
    )
    tiles = TileMap(k)
    assert tiles.schedule == "tpu"
    assert (tiles.visits(2) == kk // bk).all()
    assert tiles.revisit_axes(2) == (2,)
    assert (tiles.read_counts(2) == kk // bk).all()
    # TPU: consecutive programs keep the output block: written back once per block.
    assert tiles.transfers(2, "tpu") == (m // bm) * (n // bn)
    assert tiles.transfers(2, "gpu") == tiles.num_programs
    # Inputs: x is read once per column of blocks of the output.
    assert (tiles.read_counts(0) == n // bn).all()


def test_squeezed_dims_give_one_element():
    op = operand((4, 256), (None, 128), [g(0), g(1)], grid_rank=2)
    tiles = TileMap(kernel((4, 2), op))
    assert tiles.ranges(0, (3, 1)) == ((3, 4), (128, 256))


def test_element_dims_are_offsets_into_the_padded_array():
    # pl.Element(6, padding=(2, 1)): the index map returns an offset into x padded by 2.
    op = operand(
        (10,),
        (6,),
        [ix.apply("mul", g(0), ix.const(4))],
        kinds=["element"],
        element_padding=((2, 1),),
    )
    tiles = TileMap(kernel((3,), op))
    assert tiles.block(0, (0,)) == ((-2, 4),)
    assert tiles.padding(0, (0,)) == ((2, 0),)
    assert tiles.ranges(0, (2,)) == ((6, 10),)
    assert tiles.read_counts(0).tolist() == [1, 1, 2, 2, 1, 1, 2, 2, 1, 1]


def test_bounded_slices_use_the_size_the_index_map_returns():
    op = operand(
        (64,),
        (16,),
        [ix.apply("mul", g(0), ix.const(8))],
        kinds=["bounded"],
        sizes=(ix.apply("add", ix.const(8), g(0)),),
    )
    tiles = TileMap(kernel((4,), op))
    assert [tiles.block(0, (i,)) for i in range(4)] == [
        ((0, 8),),
        ((8, 17),),
        ((16, 26),),
        ((24, 35),),
    ]


def test_scalar_prefetch_index_maps_need_their_values():
    table = operand((4,), (4,), [], kinds=["full"], scalar_prefetch=True)
    table = Operand(**{**table.__dict__, "index_map": None})
    names = ("i", "order")
    x = Operand(
        position=1,
        role="in",
        name="x_ref",
        origin="args[0]",
        shape=(32,),
        dtype="float32",
        block_shape=(8,),
        block_kinds=("blocked",),
        memory_space="default",
        index_map=ix.IndexMap(
            names, 1, (ix.load(1, "order", [g(0)]),), "lambda i, order: (order[i],)"
        ),
    )
    k = kernel((4,), table, x, num_scalar_prefetch=1)
    unmapped = TileMap(k)
    assert unmapped.operands[1].access == "unmapped"
    with pytest.raises(ValueError, match="scalar-prefetch"):
        unmapped.ranges(1, (0,))
    tiles = TileMap(k, prefetch=(np.array([3, 3, 0, 1]),))
    assert [tiles.ranges(1, (i,)) for i in range(4)] == [
        ((24, 32),),
        ((24, 32),),
        ((0, 8),),
        ((8, 16),),
    ]
    assert tiles.read_counts(1).tolist() == [1] * 16 + [0] * 8 + [2] * 8
    assert tiles.transfers(1, "tpu") == 3  # the repeated block 3 is kept
    assert tiles.transfers(0) == 1 and tiles.operand_hbm_bytes(0) == 16


def test_grid_of_rank_zero_is_one_program():
    op = operand((8,), (8,), [ix.const(0)], grid_rank=0)
    tiles = TileMap(kernel((), op))
    assert list(tiles.programs()) == [()]
    assert tiles.ranges(0, ()) == ((0, 8),)
    assert tiles.visits(0).shape == () and int(tiles.visits(0)) == 1


def test_scratch_and_manual_operands():
    x = operand((64,), (64,), [ix.const(0)], memory_space="any")
    scratch = Operand(
        position=1,
        role="scratch",
        name="acc",
        origin="scratch[0]",
        shape=(8, 128),
        dtype="float32",
        block_shape=(8, 128),
        block_kinds=("full", "full"),
        index_map=None,
        memory_space="vmem",
    )
    tiles = TileMap(kernel((2,), x, scratch))
    assert tiles.operands[0].access == "manual" and tiles.transfers(0) == 0
    with pytest.raises(ValueError, match="scratch"):
        tiles.read_counts(1)
    assert any("stays in HBM" in n for n in tiles.notices())


def test_errors_name_the_problem():
    op = operand((8,), (8,), [g(0)])
    tiles = TileMap(kernel((2,), op))
    with pytest.raises(IndexError, match="not in the grid"):
        tiles.ranges(0, (2,))
    with pytest.raises(IndexError, match="1 operands"):
        tiles.ranges(3, (0,))
    with pytest.raises(ValueError, match="schedule"):
        TileMap(kernel((2,), op), schedule="cpu")


def test_schedule_follows_the_backend():
    op = operand((8,), (8,), [g(0)])
    assert schedule_of(kernel((1,), op, backend="triton")) == "gpu"
    assert schedule_of(kernel((1,), op, backend="mosaic_tpu")) == "tpu"
    assert schedule_of(kernel((1,), op)) == "tpu"
    assert schedule_of(kernel((1,), op), hint="gpu") == "gpu"


def test_large_grids_stay_fast_and_compact():
    n, b = 16384, 64
    ops = [
        operand((n, n), (b, b), [g(0), g(1)], grid_rank=2, position=0),
        operand((n, n), (b, b), [g(1), g(0)], grid_rank=2, position=1),
        operand((n, n), (b, b), [g(0), g(1)], grid_rank=2, role="out", position=2),
    ]
    tiles = TileMap(kernel((n // b, n // b), *ops))
    coverage = tiles.coverage(1)
    assert coverage.counts.shape == (n // b, n // b) and coverage.max == 1
    assert tiles.hbm_bytes() == tiles.min_hbm_bytes() == 3 * n * n * 4
    assert tiles.ranges(1, (3, 5)) == ((5 * b, 6 * b), (3 * b, 4 * b))


# --- figures of merit ---------------------------------------------------------------


def _kacc(bk=128):
    x = operand((256, 512), (128, bk), [g(0), g(2)], grid_rank=3)
    y = operand((512, 256), (bk, 128), [g(2), g(1)], grid_rank=3, position=1)
    o = operand((256, 256), (128, 128), [g(0), g(1)], grid_rank=3, role="out", position=2)
    scratch = Operand(
        position=3,
        role="scratch",
        name="acc",
        origin="scratch[0]",
        shape=(128, 128),
        dtype="float32",
        block_shape=(128, 128),
        block_kinds=("full", "full"),
        index_map=None,
        memory_space="vmem",
    )
    flops = 2 * 256 * 256 * 512
    return kernel(
        (2, 2, 512 // bk),
        x,
        y,
        o,
        scratch,
        backend="mosaic_tpu",
        work=KernelWork(flops, 0),
        compiler_params=(("vmem_limit_bytes", "1048576"),),
    )


def test_merit_of_a_k_accumulating_matmul():
    k = _kacc()
    figures = merit.kernel_merit(TileMap(k))
    x, y, o, _scratch = figures.operands
    assert (x.reads_min, x.reads_max, x.reads_mean) == (2, 2, 2.0)
    assert x.transfers == 16 and x.hbm_bytes == 2 * x.min_bytes  # one copy per program
    assert o.transfers == 4 and o.hbm_bytes == o.min_bytes
    block = 128 * 128 * 4
    assert figures.working_set_bytes == 3 * block * 2 + block
    assert figures.hbm_bytes == x.hbm_bytes + y.hbm_bytes + o.hbm_bytes
    assert figures.flops == 2 * 256 * 256 * 512 and figures.flops_source == "counted"
    assert figures.arithmetic_intensity == pytest.approx(figures.flops / figures.hbm_bytes)
    assert figures.vmem_limit_bytes == 1 << 20
    fit = merit.on_chip(figures, "v5e")
    assert fit.capacity_bytes == 1 << 20 and fit.fits  # 7 blocks of 64 KiB
    assert fit.bound == "memory"  # about 28 flop/byte; v5e's ridge is about 240
    # The v5e's published roofs: 197 bf16 TFLOP/s, 819 GBps; the ridge between them.
    assert (fit.peak_flops, fit.bandwidth) == (197e12, 819e9)
    assert fit.ridge == pytest.approx(240.5, abs=0.1)
    assert fit.seconds == pytest.approx(max(figures.flops / 197e12, figures.hbm_bytes / 819e9))
    assert fit.attainable_flops == pytest.approx(figures.arithmetic_intensity * 819e9)
    gpu = merit.on_chip(merit.kernel_merit(TileMap(k), "gpu"), "H100")
    assert gpu.kind == "gpu" and gpu.capacity_name == "shared memory"
    assert gpu.peak_name == "fp32"
    # cc 9.0's 227 KB of shared memory per block; the H100 SXM5's 66.9 FP32 TFLOP/s.
    assert (gpu.capacity_bytes, gpu.peak_flops, gpu.bandwidth) == (227 * 1024, 66.9e12, 3.35e12)


def test_declared_cost_is_used_when_the_count_is_unsure():
    op = operand((8,), (8,), [g(0)])
    k = kernel((1,), op, work=KernelWork(10, 0, exact=False), cost_estimate=CostEstimate(99, 1, 0))
    figures = merit.kernel_merit(TileMap(k))
    assert (figures.flops, figures.flops_source) == (99, "declared")
    k = kernel((1,), op)
    figures = merit.kernel_merit(TileMap(k))
    assert figures.flops is None and figures.arithmetic_intensity is None
    assert merit.on_chip(figures, "H100").bound == ""
