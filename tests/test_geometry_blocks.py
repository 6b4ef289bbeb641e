"""Block offsets and blocks that miss their array (pure geometry, no JAX)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pallaslab._src.geometry.blocks import block_starts, grid_indices, stray_blocks
from pallaslab._src.records import indexmap as ix
from tests import records


def operand(shape, block, outputs, kinds=None, names=("i",)):
    return records.operand(shape, block, outputs, kinds=kinds, names=names, name="x_ref")


kernel = records.kernel


def test_block_starts_scale_block_indices_by_block_size():
    op = operand((1024,), (128,), [ix.arg(0, "i")])
    assert block_starts(op, (8,))[:, 0].tolist() == [0, 128, 256, 384, 512, 640, 768, 896]


def test_squeezed_dims_count_in_elements():
    op = operand(
        (4, 256),
        (None, 128),
        [ix.arg(0, "i"), ix.arg(1, "j")],
        kinds=["squeezed", "blocked"],
        names=("i", "j"),
    )
    starts = block_starts(op, (4, 2))
    assert starts[3, 1].tolist() == [3, 128]


def test_edge_blocks_that_hang_over_are_fine():
    op = operand((1000,), (128,), [ix.arg(0, "i")])
    assert stray_blocks(kernel((8,), op)) == []


def test_a_block_past_the_end_is_reported():
    op = operand((1000,), (128,), [ix.arg(0, "i")])
    (stray,) = stray_blocks(kernel((9,), op))
    assert stray.program == (8,) and stray.start == (1024,)
    assert "covers elements 1024..1151 of dimension 0, which has only 1000" in stray.describe()


def test_negative_blocks_are_reported():
    op = operand((512,), (128,), [ix.apply("sub", ix.arg(0, "i"), ix.const(1))])
    (stray,) = stray_blocks(kernel((4,), op))
    assert stray.program == (0,)


@given(st.integers(1, 6), st.integers(1, 64), st.integers(1, 8))
def test_dividing_grids_never_stray(blocks, block, extra):
    op = operand((blocks * block,), (block,), [ix.arg(0, "i")])
    assert stray_blocks(kernel((blocks,), op)) == []
    assert stray_blocks(kernel((blocks + extra,), op))[0].program == (blocks,)


def test_grid_indices_enumerate_programs():
    i, j = grid_indices((2, 3))
    assert i.tolist() == [[0, 0, 0], [1, 1, 1]] and j.tolist() == [[0, 1, 2]] * 2
    assert grid_indices(()) == []


def test_index_map_text_and_constant_folding():
    expr = ix.apply("add", ix.apply("mul", ix.arg(0, "i"), ix.const(2)), ix.const(1))
    assert expr.to_text() == "i * 2 + 1"
    assert ix.apply("mul", ix.const(3), ix.const(4)) == ix.const(12)
    nested = ix.apply("sub", ix.arg(0, "i"), ix.apply("sub", ix.arg(1, "j"), ix.const(1)))
    assert nested.to_text() == "i - (j - 1)"
    assert ix.render_lambda(["i"], [ix.arg(0, "i")]) == "lambda i: (i,)"
    assert np.array_equal(nested.evaluate([np.array(5), np.array(3)]), 3)
