"""Which programs share blocks, and races under GPU and TPU rules (pure geometry)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pallaslab._src.geometry import races
from pallaslab._src.geometry.races import find_races
from pallaslab._src.records import Operand
from pallaslab._src.records import indexmap as ix
from tests import records

NAMES = ("i", "j", "k")


def output(shape, block, outputs, names, kinds=None, position=2):
    return records.operand(
        shape,
        block,
        outputs,
        names=names,
        kinds=kinds,
        role="out",
        position=position,
        name="o_ref",
        origin="outputs[0]",
    )


def kernel(grid, *operands, semantics=None):
    return records.kernel(grid, *operands, dimension_semantics=semantics)


def kacc(grid=(2, 2, 2), semantics=("parallel", "parallel", "arbitrary"), order=(0, 1, 2)):
    """The k-accumulating matmul's output: block (i, j), revisited along k.

    `order` places the (i, j, k) roles on grid axes, e.g. (1, 2, 0) puts k first.
    """
    names = tuple(NAMES[r] for r in order)
    i, j = order.index(0), order.index(1)
    out = output((256, 256), (128, 128), [ix.arg(i, names[i]), ix.arg(j, names[j])], names)
    return kernel(grid, out, semantics=semantics)


def test_kacc_races_on_gpu_and_not_on_tpu_with_k_arbitrary():
    k = kacc()
    gpu = find_races(k, "gpu")
    assert len(gpu) == 4
    first = gpu[0]
    assert (first.operand, first.block, first.kind) == ("o_ref", (0, 0), "parallel-write")
    assert first.programs == ((0, 0, 0), (0, 0, 1))
    assert first.axes == (2,)
    assert {c.block for c in gpu} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert find_races(k, "tpu") == []


def test_tpu_parallel_k_races_and_default_semantics_do_not():
    assert len(find_races(kacc(semantics=("parallel", "parallel", "parallel")), "tpu")) == 4
    assert find_races(kacc(semantics=None), "tpu") == []  # every axis "arbitrary"


def test_tpu_flags_an_output_block_left_and_revisited():
    # k outermost: block (i, j) is written at programs (0, i, j) and (1, i, j), with
    # the other blocks in between; a TPU does not read the block back.
    k = kacc(semantics=("arbitrary", "parallel", "parallel"), order=(2, 0, 1))
    tpu = find_races(k, "tpu")
    assert [c.kind for c in tpu] == ["revisit"] * 4
    assert tpu[0].programs == ((0, 0, 0), (1, 0, 0))
    semantics_all_arbitrary = kacc(semantics=("arbitrary",) * 3, order=(2, 0, 1))
    assert len(find_races(semantics_all_arbitrary, "tpu")) == 4
    assert len(find_races(k, "gpu")) == 4


def test_clean_kernel_has_no_races_anywhere():
    out = output((256,), (128,), [ix.arg(0, "i")], ("i",))
    k = kernel((2,), out)
    assert find_races(k, "gpu") == [] and find_races(k, "tpu") == []
    (sentence,) = races.summarize(k, [], "gpu")
    assert "no races" in sentence


def test_summaries_name_the_axis_and_the_fix():
    k = kacc()
    (gpu,) = races.summarize(k, find_races(k, "gpu"), "gpu")
    assert "each of its 4 blocks" in gpu and "grid axis 2 (k)" in gpu
    assert "atomics" in gpu and "fori_loop" in gpu
    (tpu,) = races.summarize(k, [], "tpu")
    assert "no races" in tpu and "grid axis 2 (k)" in tpu and "in order" in tpu
    revisit = kacc(semantics=None, order=(2, 0, 1))
    (words,) = races.summarize(revisit, find_races(revisit, "tpu"), "tpu")
    assert "innermost" in words


def test_unknown_backend_and_prefetch_maps_are_reported():
    with pytest.raises(ValueError, match="backend"):
        find_races(kacc(), "cuda")
    table = ix.load(1, "order", [ix.arg(0, "i")])
    out = Operand(
        position=1,
        role="out",
        name="o_ref",
        origin="outputs[0]",
        shape=(64,),
        dtype="float32",
        block_shape=(8,),
        block_kinds=("blocked",),
        index_map=ix.IndexMap(("i", "order"), 1, (table,), ""),
        memory_space="default",
    )
    k = kernel((8,), out)
    with pytest.raises(ValueError, match="scalar-prefetch"):
        find_races(k, "gpu")
    order = np.array([0, 0, 1, 2, 3, 4, 5, 6])
    (conflict,) = find_races(k, "gpu", prefetch=[order])
    assert conflict.programs == ((0,), (1,))


def test_element_windows_that_overlap_conflict():
    # Windows of 10 elements every 8: neighbours share 2 elements.
    out = output(
        (80,), (10,), [ix.apply("mul", ix.arg(0, "i"), ix.const(8))], ("i",), kinds=["element"]
    )
    k = kernel((8,), out)
    gpu = find_races(k, "gpu")
    assert len(gpu) == 7
    assert gpu[0].programs == ((0,), (1,))
    starts = np.arange(8).reshape(8, 1) * 8
    assert races.sharing_axes(starts, (8,), (10,), aligned=False) == (True,)
    assert races.sharing_axes(starts, (8,), (8,), aligned=False) == (False,)


def _brute_force_sharing(starts, grid, sizes):
    coords = list(itertools.product(*(range(g) for g in grid)))
    shared = [False] * len(grid)
    for p, q in itertools.combinations(range(len(coords)), 2):
        if all(abs(a - b) < s for a, b, s in zip(starts[p], starts[q], sizes, strict=True)):
            for axis in range(len(grid)):
                if coords[p][axis] != coords[q][axis]:
                    shared[axis] = True
    return tuple(shared)


@settings(max_examples=60, deadline=None)
@given(
    grid=st.lists(st.integers(1, 3), min_size=1, max_size=3),
    data=st.data(),
    aligned=st.booleans(),
)
def test_sharing_axes_matches_brute_force(grid, data, aligned):
    count = int(np.prod(grid))
    sizes = (4, 4)
    if aligned:
        cells = data.draw(st.lists(st.integers(0, 3), min_size=count * 2, max_size=count * 2))
        starts = np.asarray(cells, np.int64).reshape(count, 2) * 4
    else:
        cells = data.draw(st.lists(st.integers(0, 12), min_size=count * 2, max_size=count * 2))
        starts = np.asarray(cells, np.int64).reshape(count, 2)
    got = races.sharing_axes(starts, grid, sizes, aligned=aligned)
    assert got == _brute_force_sharing(starts, grid, sizes)


@settings(max_examples=40, deadline=None)
@given(grid=st.lists(st.integers(1, 3), min_size=1, max_size=3), data=st.data())
def test_gpu_conflicts_are_exactly_the_shared_blocks(grid, data):
    count = int(np.prod(grid))
    blocks = data.draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
    table = np.asarray(blocks).reshape(grid)
    # An index map reading the block from a prefetch table indexed by the program.
    flat = ix.apply("add", ix.arg(0, "a"), ix.const(0))
    for axis in range(1, len(grid)):
        flat = ix.apply("add", ix.apply("mul", flat, ix.const(grid[axis])), ix.arg(axis, "b"))
    names = tuple(f"g{a}" for a in range(len(grid)))
    index_map = ix.IndexMap(
        (*names, "table"), len(grid), (ix.load(len(grid), "table", [flat]),), ""
    )
    out = Operand(
        2, "out", "o_ref", "outputs[0]", (16,), "float32", (4,), ("blocked",), index_map, "default"
    )
    k = kernel(grid, out)
    conflicts = find_races(k, "gpu", prefetch=[table.reshape(-1)])
    values, counts = np.unique(table, return_counts=True)
    assert sorted(c.block for c in conflicts) == sorted((int(v),) for v in values[counts > 1])
    for c in conflicts:
        assert all(table[p] == c.block[0] for p in c.programs)
