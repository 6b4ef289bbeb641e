"""Memory: what inspectors keep alive, summaries computed in pieces, failures that say where.

Kernels of our own, small arrays. Oracles: `weakref` and the garbage collector (an
array nobody holds is gone), NumPy's own reductions on the whole array (the summaries
and comparisons computed in pieces give the same figures), and the step a failure
names.
"""

from __future__ import annotations

import copy
import gc
import pickle
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import memory, running
from pallaslab._src.geometry import mismatch
from pallaslab._src.views.inspector import Inspector

ROWS = 512  # 512 x 1024 float32: 2 MiB, over the 1 MiB held weakly


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


def scale(x):
    spec = pl.BlockSpec((128, 1024), lambda i: (i, 0))
    return pl.pallas_call(
        scale_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 128,),
        in_specs=[spec],
        out_specs=spec,
    )(x)


CELL = """\
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0

spec = pl.BlockSpec((128, 1024), lambda i: (i, 0))
scale = pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct((512, 1024), jnp.float32),
                       grid=(4,), in_specs=[spec], out_specs=spec)
x = jnp.arange(512 * 1024, dtype=jnp.float32).reshape(512, 1024) / 1024
"""


def test_an_inspector_keeps_no_array_of_its_run(ip):
    """Re-running a cell frees the earlier run's input and output: no growth per run."""
    result = ip.run_cell(f'%%kernel scale(x) --ref "lambda a: a * 2 + 1"\n{CELL}')
    assert result.success, result.error_in_exec
    first = ip.user_ns["_kernel"]
    inputs = weakref.ref(ip.user_ns["x"])
    outputs = weakref.ref(first.result.values[0])
    expected = weakref.ref(first.result.expected[0])
    del first  # the inspector the cell showed stays alive, as widgets do
    again = ip.run_cell(f'%%kernel scale(x) --ref "lambda a: a * 2 + 1"\n{CELL}')
    assert again.success, again.error_in_exec
    gc.collect()
    assert inputs() is None
    assert outputs() is None
    assert expected() is None


def test_the_view_copy_holds_arrays_weakly_and_works_without_them():
    x = jnp.arange(ROWS * 1024, dtype=jnp.float32).reshape(ROWS, 1024)
    inspection = pallaslab.inspect(scale, x)
    inspection = inspection.with_result(inspection.run())
    viewed = inspection.for_view()
    assert viewed.result.values == ()
    assert viewed.result.outputs == inspection.result.outputs  # the summaries stay
    kept = weakref.ref(x)
    widget = Inspector(inspection)
    del x, inspection
    gc.collect()
    assert kept() is None  # only the user's names and records held it
    # What needs inputs still works, on seeded data of the same shape.
    rerun = widget.inspection.run()
    assert rerun.values[0].shape == (ROWS, 1024)
    assert rerun.seeded_inputs == ("x",)
    assert widget.inspection.tiles().hbm_bytes() > 0


def test_while_the_records_hold_them_the_view_uses_the_real_inputs():
    x = jnp.arange(ROWS * 1024, dtype=jnp.float32).reshape(ROWS, 1024)
    inspection = pallaslab.inspect(scale, x)
    viewed = inspection.for_view()
    result = viewed.run()
    assert result.seeded_inputs == ()
    np.testing.assert_array_equal(result.values[0], np.asarray(x) * 2 + 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16, np.int32, np.bool_])
def test_summaries_in_pieces_match_numpy_on_the_whole(monkeypatch, dtype):
    monkeypatch.setattr(running, "SUMMARY_CHUNK", 1000)  # many pieces
    rng = np.random.default_rng(0)
    value = (rng.standard_normal(12_345) * 100).astype(dtype)
    if np.dtype(dtype).kind == "f" or dtype is jnp.bfloat16:
        value[[3, 5000, 12_000]] = [np.nan, np.inf, -np.inf]
    summary = running.summarize("out", value)
    wide = value.astype(np.float64)
    finite = wide[np.isfinite(wide)]
    assert summary.nan_count == int(np.isnan(wide).sum())
    assert summary.inf_count == int(np.isinf(wide).sum())
    if np.dtype(dtype).kind != "b":
        assert summary.min == float(finite.min())
        assert summary.max == float(finite.max())


def test_comparisons_in_pieces_match_the_whole(monkeypatch):
    rng = np.random.default_rng(1)
    want = rng.standard_normal((300, 70)).astype(np.float32)
    got = want.copy()
    got[17, 3] += 1.0
    got[299, 69] = np.nan
    got[150, 0] = np.inf
    whole = mismatch.element_errors(got, want, 2e-5, 2e-5)
    monkeypatch.setattr(mismatch, "CHUNK_ELEMENTS", 97)  # pieces cut across rows
    pieces = mismatch.element_errors(got, want, 2e-5, 2e-5)
    np.testing.assert_array_equal(pieces.bad, whole.bad)
    np.testing.assert_array_equal(pieces.nonfinite, whole.nonfinite)
    assert (pieces.max_abs_err, pieces.nan_count, pieces.inf_count) == (
        whole.max_abs_err,
        1,
        1,
    )
    assert pieces.bad.sum() == 3
    counts = mismatch.per_tile(pieces.bad, (64, 32))
    assert counts.sum() == 3
    assert counts[0, 0] == 1 and counts[4, 2] == 1 and counts[2, 0] == 1


def test_a_step_short_of_memory_says_the_kernel_ran_and_which_step(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 1024)  # 1 KiB free
    x = jnp.arange(ROWS * 1024, dtype=jnp.float32).reshape(ROWS, 1024)
    inspection = pallaslab.inspect(scale, x)
    with pytest.raises(memory.StepMemoryError) as raised:
        inspection.run(ref=lambda a: a * 2 + 1)
    message = str(raised.value)
    assert message.startswith("The kernel ran (")
    assert "comparing its outputs with the reference was not started" in message
    assert "1 KiB is free" in message
    # Without a reference, the run stands; the checks are skipped with a notice.
    result = inspection.run()
    assert any("Not checked for leaks" in n and "is free" in n for n in result.notices)


def test_an_out_of_memory_error_inside_a_step_names_it():
    step = memory.step("comparing its outputs with the reference", "The kernel ran (1 s)")
    with pytest.raises(memory.StepMemoryError) as raised, step:
        raise MemoryError("Unable to allocate 8.00 GiB")
    assert str(raised.value).startswith("The kernel ran (1 s), but comparing its outputs")
    assert "ran out of memory" in str(raised.value)


def test_an_inspection_pickles_and_copies_as_records():
    x = jnp.arange(ROWS * 1024, dtype=jnp.float32).reshape(ROWS, 1024)
    inspection = pallaslab.inspect(scale, x)
    inspection = inspection.with_result(inspection.run(ref=lambda a: a * 2 + 1))
    copied = copy.deepcopy(inspection)
    assert copied == inspection and copied is not inspection
    assert copied.kernels[0] is not inspection.kernels[0]
    assert copied.tiles().hbm_bytes() == inspection.tiles().hbm_bytes()  # program shared
    loaded = pickle.loads(pickle.dumps(inspection))
    assert loaded == inspection
    np.testing.assert_array_equal(loaded.result.values[0], inspection.result.values[0])
    with pytest.raises(ValueError, match="built without a program"):
        loaded.lower("stablehlo")


def test_the_magic_says_the_kernel_ran_and_which_step_lacked_memory(ip, monkeypatch):
    from pallaslab._src.magic import KernelCellError

    monkeypatch.setattr(memory, "available_bytes", lambda: 1024)
    result = ip.run_cell(f'%%kernel scale(x) --ref "lambda a: a * 2 + 1"\n{CELL}')
    error = result.error_in_exec
    assert isinstance(error, KernelCellError), repr(error)
    assert error.diagnosis.kind == "memory"
    assert "The kernel ran (" in str(error)
    assert "comparing its outputs with the reference was not started" in str(error)
    assert "x" in ip.user_ns  # the cell's names stay
