"""NumPy's advanced-indexing layout, as both lane walkers apply it, against NumPy itself."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pallaslab._src.core.jax_adapter.lanes import result_layout


@st.composite
def indexers(draw):
    """Per dimension a slice or an integer array (all of one broadcast shape), and sizes."""
    rank = draw(st.integers(1, 4))
    is_slice = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    int_shape = () if all(is_slice) else tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    starts = [draw(st.integers(0, 2)) for _ in range(rank)]
    sizes = [draw(st.integers(1, 4)) for _ in range(rank)]
    seed = draw(st.integers(0, 2**16))
    return is_slice, int_shape, starts, sizes, seed


@settings(max_examples=300, deadline=None)
@given(indexers())
def test_each_lane_reads_the_element_numpy_reads(case):
    is_slice, int_shape, starts, sizes, seed = case
    shape = [start + size for start, size in zip(starts, sizes, strict=True)]
    rng = np.random.default_rng(seed)
    integers = [rng.integers(0, n, int_shape) for n in shape]
    index = tuple(
        slice(start, start + size) if sliced else integers[k]
        for k, (sliced, start, size) in enumerate(zip(is_slice, starts, sizes, strict=True))
    )
    # The oracle: the coordinates of every element `x[index]` reads, by NumPy.
    expected = [np.indices(shape)[k][index] for k in range(len(shape))]
    targets = result_layout(is_slice, int_shape)
    lanes = [
        (np.arange(start, start + size) if sliced else integers[k]).reshape(target)
        for k, (sliced, start, size, target) in enumerate(
            zip(is_slice, starts, sizes, targets, strict=True)
        )
    ]
    out = np.broadcast_shapes(*(lane.shape for lane in lanes))
    for k, lane in enumerate(lanes):
        np.testing.assert_array_equal(np.broadcast_to(lane, out), expected[k])
