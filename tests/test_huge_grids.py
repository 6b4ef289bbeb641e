"""Grids of any size inspect, and say what they could not do; nothing runs out of memory.

A grid of 2**40 programs used to reach `np.indices` (terabytes) before anything was
shown. Block checks and tile maps now evaluate index maps only along the grid axes
they read; what must enumerate programs (races, the emulator) refuses beyond
`limits.MAX_PROGRAMS` with a `GridTooLargeError` saying so.
"""

from __future__ import annotations

import itertools
import textwrap

import jax
import jax.numpy as jnp
import pytest
from IPython.utils.capture import capture_output
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.geometry.blocks import stray_blocks
from pallaslab._src.geometry.limits import MAX_PROGRAMS, GridTooLargeError, check_programs
from pallaslab._src.geometry.races import find_races
from pallaslab._src.views.inspector import Inspector

HUGE = 2**40


def copy_call(n, block, grid, index_map, out_map=None):
    """A copy kernel over an (n,) array with the given grid and index maps."""

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    fn = pl.pallas_call(
        kernel,
        out_shape=spec,
        grid=grid,
        in_specs=[pl.BlockSpec((block,), index_map)],
        out_specs=pl.BlockSpec((block,), out_map or index_map),
    )
    return fn, spec


def test_the_limit():
    assert check_programs((8, 8), "test") == 64
    with pytest.raises(GridTooLargeError, match="1,099,511,627,776 programs, more than"):
        check_programs((HUGE,), "run it")
    with pytest.raises(ValueError, match="negative"):
        check_programs((-1,), "run it")


# (grid, index map) pairs; the oracle calls the same Python function program by program.
STRAY_CASES = [
    ((8,), lambda i: (i,)),
    ((9,), lambda i: (i,)),  # program 8 starts at 1024, past a 1024 array
    ((4, 5), lambda i, j: (i + j,)),  # 3 + 4 = 7 is the last block
    ((4, 5), lambda i, j: (2 * j - 1,)),  # program (0, 0) starts before the array
    ((3, 3, 3), lambda i, j, k: (i * 3 + j - k,)),
    ((6, 2), lambda i, j: (7 - i * j,)),
]


@pytest.mark.parametrize(("grid", "index_map"), STRAY_CASES)
def test_stray_blocks_match_a_program_by_program_oracle(grid, index_map):
    fn, spec = copy_call(1024, 128, grid, index_map, out_map=lambda *a: (0,))
    kernel = pallaslab.inspect(fn, spec).kernels[0]
    found = [s for s in stray_blocks(kernel) if s.operand.role == "in"]
    # The oracle: every program in row-major order, the first whose block misses.
    expected = None
    for program in itertools.product(*(range(n) for n in grid)):
        start = int(index_map(*program)[0]) * 128
        if not 0 <= start < 1024:
            expected = (program, start)
            break
    if expected is None:
        assert found == []
    else:
        assert [(s.program, s.start[0]) for s in found] == [expected]


def test_block_checks_and_tile_maps_of_a_trillion_programs():
    fn, spec = copy_call(1024, 128, (HUGE,), lambda i: (0,))
    inspection = pallaslab.inspect(fn, spec)
    kernel = inspection.kernels[0]
    assert stray_blocks(kernel) == []
    tiles = inspection.tiles(0)
    coverage = tiles.coverage(0)
    # Hand-computed: every program reads block 0 (elements 0..127); the rest never.
    assert (coverage.min, coverage.max) == (0, HUGE)
    assert coverage.elements_with(HUGE) == 128 and coverage.elements_with(0) == 896
    assert tiles.transfers(0, "tpu") == 1  # the same block all along: copied once
    assert tiles.transfers(0, "gpu") == HUGE
    assert tiles.visits(0).shape == (HUGE,)  # a broadcast view, not 8 TB


def test_an_index_map_over_too_many_programs_is_not_mapped_and_says_so():
    fn, spec = copy_call(1024, 128, (HUGE,), lambda i: (i,))
    inspection = pallaslab.inspect(fn, spec)
    tiles = inspection.tiles(0)
    assert tiles.operands[0].access == "unmapped"
    assert f"more than the {MAX_PROGRAMS:,} pallaslab maps" in tiles.notices()[0]
    assert stray_blocks(inspection.kernels[0]) == []  # not checkable here: skipped


def test_a_two_axis_grid_maps_along_the_axis_its_blocks_vary_on():
    # 2**20 x 2**20 programs; the block depends on i only: 2**20 blocks of 1 element,
    # each read by the 2**20 programs along j (hand-computed).
    fn, spec = copy_call(2**20, 1, (2**20, 2**20), lambda i, j: (i,))
    tiles = pallaslab.inspect(fn, spec).tiles(0)
    assert tiles.operands[0].axes == (0,)
    coverage = tiles.coverage(0)
    assert coverage.min == coverage.max == 2**20
    assert tiles.transfers(0, "tpu") == 2**20  # one copy per i, kept along j


def test_races_and_runs_refuse_with_a_clear_error():
    fn, spec = copy_call(1024, 128, (HUGE,), lambda i: (0,))
    kernel = pallaslab.inspect(fn, spec).kernels[0]
    with pytest.raises(GridTooLargeError, match="check for races"):
        find_races(kernel, "gpu")
    with pytest.raises(GridTooLargeError, match="run on CPU"):
        pallaslab.emulate(fn)(jnp.zeros(1024, jnp.float32))
    with pytest.raises(GridTooLargeError, match="run on CPU"):
        pallaslab.emulate(fn, interpret=True)(jnp.zeros(1024, jnp.float32))


def test_the_inspector_opens_every_tab_of_a_trillion_programs():
    fn, spec = copy_call(1024, 128, (2**20, 2**20), lambda i, j: (i + j,))
    inspection = pallaslab.inspect(fn, spec)
    widget = Inspector(inspection)
    for tab in [t["id"] for t in widget.tabs]:
        widget.selected = tab
        assert "error" not in widget.panes[tab], (tab, widget.panes[tab])
    races = widget.panes["overview"]["kernels"][0]["races"]["gpu"]
    assert not races["checked"] and "1099511627776 programs" in races["sentences"][0]
    notices = widget.panes["tiles"]["kernels"][0]["notices"]
    assert any("more than the" in n for n in notices)
    assert "pallaslab inspection" in widget._repr_mimebundle_()[0]["text/plain"]


def test_the_magic_inspects_a_huge_grid_without_running_it(ip):
    body = textwrap.dedent(
        """\
        import jax, jax.numpy as jnp
        from jax.experimental import pallas as pl
        def k(x_ref, o_ref):
            o_ref[...] = x_ref[...]
        f = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
            grid=(2**40,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
            out_specs=pl.BlockSpec((128,), lambda i: (i,)))
        x = jnp.zeros(1024)
        """
    )
    with capture_output() as captured:
        result = ip.run_cell(f"%%kernel f(x) --no-run\n{body}")
    assert result.success, result.error_in_exec
    assert ip.user_ns["_kernel"].kernels[0].grid == (HUGE,)
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in captured.outputs)


def test_the_limit_counts_the_programs_an_index_map_reads():
    # Just past the limit along the axis it reads: not mapped (nothing evaluated).
    fn, spec = copy_call(1024, 1, (MAX_PROGRAMS + 1,), lambda i: (i % 1024,))
    assert pallaslab.inspect(fn, spec).tiles(0).operands[0].access == "unmapped"
    # As many programs, but the index map reads one axis of 4096: mapped exactly.
    fn, spec = copy_call(4096, 1, (4096, MAX_PROGRAMS // 4096), lambda i, j: (i,))
    coverage = pallaslab.inspect(fn, spec).tiles(0).coverage(0)
    assert coverage.min == coverage.max == MAX_PROGRAMS // 4096
