"""`pytest --pallaslab` on kernels its emulator does not model, checked in JAX's interpreters.

Mosaic GPU kernels (`plgpu.kernel`, threads, barriers, SMEM) run in JAX's Mosaic GPU
interpreter; TPU kernels with DMAs and semaphores, or over a TPU mesh, in Pallas' TPU
interpreter. The sanitizer runs each again there with the race detector on and with
fresh memory filled otherwise. Oracles: each kernel's design (written to have one
problem, or none, on a line this file finds by its `# marks:` comment), JAX's own
race-detection tests for the same patterns (a DMA read before its wait; threads
storing to one element), and hand-counted elements for unwritten outputs.
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallaslab._src.core import sanitizer

plgpu = pytest.importorskip("jax.experimental.pallas.mosaic_gpu")
gpu_params = pytest.importorskip("jax._src.pallas.mosaic_gpu.interpret.params")
GPU_INTERPRET = gpu_params.InterpretGPUParams()


def _line(function, mark: str) -> int:
    """The line of `function`'s source marked `# marks: MARK`."""
    lines, first = inspect.getsourcelines(function)
    for offset, text in enumerate(lines):
        if text.rstrip().endswith(f"# marks: {mark}"):
            return first + offset
    raise AssertionError(f"no line marked {mark}")


def _sanitized(fn, *args, checks=None):
    options = sanitizer.SanitizerOptions(**({"checks": frozenset(checks)} if checks else {}))
    checker = sanitizer.Sanitizer(options)
    checker.install()
    try:
        got = jax.jit(fn)(*args)
        calls = checker.finish()
    finally:
        checker.uninstall()
    (call,) = calls
    assert call.status == "checked", call.reason
    return np.asarray(jax.tree_util.tree_leaves(got)[0]), call


def _threads(kernel, out_shape=(4,), **kwargs):
    return plgpu.kernel(
        kernel,
        out_type=jax.ShapeDtypeStruct(out_shape, jnp.int32),
        num_threads=4,
        thread_name="t",
        interpret=GPU_INTERPRET,
        **kwargs,
    )


def _own_index(o_ref):
    t = jax.lax.axis_index("t")
    o_ref[t] = t


def _one_element(o_ref):
    t = jax.lax.axis_index("t")
    o_ref[0] = t  # marks: store


def _half_written(o_ref):
    t = jax.lax.axis_index("t")

    @pl.when(t < 2)
    def _():
        o_ref[t] = t


def _read_past(x_ref, o_ref):
    t = jax.lax.axis_index("t")
    o_ref[t] = x_ref[t + 2]  # marks: read


def test_a_clean_mosaic_gpu_kernel_is_checked_and_agrees():
    got, call = _sanitized(_threads(_own_index))
    # Oracle: each of the 4 threads stores its own index.
    np.testing.assert_array_equal(got, np.arange(4))
    assert call.findings == () and call.agrees is True
    assert any("Mosaic GPU interpreter" in note for note in call.notes)


def test_threads_storing_to_one_element_race_at_the_store():
    _, call = _sanitized(_threads(_one_element))
    races = [f for f in call.findings if f.kind == "race"]
    assert races and {f.backend for f in races} == {"gpu"}
    assert races[0].location.line == _line(_one_element, "store")
    assert "race detector" in races[0].message
    # Elements 1-3 are never written: they change with what fills fresh memory.
    (unwritten,) = [f for f in call.findings if f.kind == "uninitialized"]
    assert "of 4 elements of output 0" in unwritten.message
    assert "race above" in unwritten.message


def test_an_output_left_half_unwritten_is_uninitialized():
    got, call = _sanitized(_threads(_half_written))
    (finding,) = call.findings
    # Oracle: threads 0 and 1 store; elements 2 and 3 hold what filled fresh memory.
    assert finding.kind == "uninitialized"
    assert "2 of 4 elements of output 0 (the first at (2,))" in finding.message
    np.testing.assert_array_equal(got[:2], [0, 1])
    assert call.agrees is True


def test_a_read_past_the_input_is_out_of_bounds_and_the_check_goes_on():
    def read_past(x):
        kernel = plgpu.kernel(
            _read_past,
            out_type=jax.ShapeDtypeStruct((4,), jnp.int32),
            num_threads=4,
            thread_name="t",
            interpret=gpu_params.InterpretGPUParams(out_of_bounds_reads="uninitialized"),
        )
        return kernel(x)

    _, call = _sanitized(read_past, jnp.arange(4, dtype=jnp.int32))
    kinds = {f.kind for f in call.findings}
    assert "out-of-bounds" in kinds, call.findings
    finding = next(f for f in call.findings if f.kind == "out-of-bounds")
    assert finding.check == "bounds"
    assert finding.location.line == _line(_read_past, "read")


def test_threads_ordered_by_a_barrier_do_not_race():
    x = jnp.arange(128, dtype=jnp.float32)

    @functools.partial(
        plgpu.kernel,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_types={"smem_ref": plgpu.SMEM(x.shape, x.dtype), "barrier_ref": plgpu.Barrier()},
        num_threads=2,
        thread_name="t",
        interpret=GPU_INTERPRET,
    )
    def produce_then_consume(x_ref, out_ref, smem_ref, barrier_ref):
        t = jax.lax.axis_index("t")

        @pl.when(t == 0)
        def _():
            smem_ref[...] = x_ref[...] * 2
            plgpu.barrier_arrive(barrier_ref)

        @pl.when(t == 1)
        def _():
            plgpu.barrier_wait(barrier_ref)
            out_ref[...] = smem_ref[...] + 1

    got, call = _sanitized(produce_then_consume, x)
    np.testing.assert_array_equal(got, 2 * np.arange(128) + 1)
    assert call.findings == () and call.agrees is True


def test_only_the_checks_asked_for_run():
    _, call = _sanitized(_threads(_one_element), checks={"bounds"})
    assert call.findings == () and call.agrees is None


# -- TPU kernels with DMAs ------------------------------------------------------------


def _copy_then_read(x_ref, o_ref, t_ref, sem):
    copy = pltpu.make_async_copy(x_ref, t_ref, sem)
    copy.start()
    copy.wait()
    o_ref[...] = t_ref[...] + 1.0


def _read_before_wait(x_ref, o_ref, t_ref, sem):
    copy = pltpu.make_async_copy(x_ref, t_ref, sem)
    copy.start()  # marks: dma
    o_ref[...] = t_ref[...] + 1.0  # marks: early read
    copy.wait()


def _dma_call(kernel, x, interpret):
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA],
        interpret=interpret,
    )(x)


@pytest.mark.parametrize("interpret", [True, pltpu.InterpretParams()], ids=["plain", "tpu"])
def test_a_dma_awaited_before_its_read_is_clean(interpret):
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    got, call = _sanitized(functools.partial(_dma_call, _copy_then_read, interpret=interpret), x)
    np.testing.assert_array_equal(got, np.asarray(x) + 1)
    assert call.findings == () and call.agrees is True
    assert any("TPU interpreter" in note for note in call.notes)
    assert any("DMAs" in note for note in call.notes)


def test_a_read_before_the_dma_waits_races_with_the_dma():
    x = jnp.zeros((8, 128), jnp.float32)
    _, call = _sanitized(
        functools.partial(_dma_call, _read_before_wait, interpret=pltpu.InterpretParams()), x
    )
    (race,) = [f for f in call.findings if f.kind == "race"]
    lines = {_line(_read_before_wait, "dma"), _line(_read_before_wait, "early read")}
    assert race.backend == "tpu"
    assert race.location.line in lines
    assert f"line {(lines - {race.location.line}).pop()}" in race.message
    assert "DMA" in race.message


def test_a_tpu_core_map_kernel_is_checked_in_the_tpu_interpreter():
    mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)

    def double(x):
        def body(x_hbm, o_hbm, x_vmem):
            pltpu.sync_copy(x_hbm, x_vmem)
            x_vmem[...] = x_vmem[...] * 2
            pltpu.sync_copy(x_vmem, o_hbm)

        kernel = pl.kernel(
            body,
            out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
            mesh=mesh,
            scratch_types=[pltpu.VMEM(x.shape, x.dtype)],
            interpret=pltpu.InterpretParams(),
        )
        return kernel(x)

    got, call = _sanitized(double, x)
    np.testing.assert_array_equal(got, 2 * np.asarray(x))
    assert call.findings == () and call.agrees is True
    assert any("TPU interpreter" in note for note in call.notes)


# -- Checks beside the tests (background) ----------------------------------------------


def _last_block_wins(x):
    return pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2.0),
        out_shape=jax.ShapeDtypeStruct((8,), x.dtype),
        grid=(4,),
        in_specs=[pl.BlockSpec((8,), lambda i: (i,))],
        out_specs=pl.BlockSpec((8,), lambda i: (0,)),
        interpret=True,
    )(x)


def _session(background: bool):
    """A mixed suite's kernels, in order: emulated, Mosaic GPU, TPU DMA, emulated."""
    checker = sanitizer.Sanitizer(sanitizer.SanitizerOptions(background=background))
    checker.install()
    x = jnp.arange(32, dtype=jnp.float32)
    dma_x = jnp.zeros((8, 128), jnp.float32)
    try:
        for test, run in (
            ("test_race", lambda: _last_block_wins(x)),
            ("test_threads", jax.jit(_threads(_one_element))),
            ("test_dma", lambda: _dma_call(_read_before_wait, dma_x, pltpu.InterpretParams())),
            ("test_race_again", lambda: _last_block_wins(x + 1)),
        ):
            checker.begin(test)
            jax.block_until_ready(run())
            checker.finish()
        report = checker.report()
    finally:
        checker.uninstall()
    return report


def test_checks_beside_the_tests_find_what_checks_after_each_test_find():
    inline, beside = _session(background=False), _session(background=True)
    # Oracle: the same session checked test by test on the tests' thread.
    assert [c.nodeid for c in beside.calls] == [c.nodeid for c in inline.calls]
    assert [c.nodeid for c in beside.calls] == ["test_race", "test_threads", "test_dma"]
    for a, b in zip(inline.calls, beside.calls, strict=True):
        # Racing threads may compute otherwise run to run: their races are compared.
        assert (a.kernel, a.status) == (b.kernel, b.status)
        assert {(f.kind, f.location) for f in a.findings if f.kind == "race"} == {
            (f.kind, f.location) for f in b.findings if f.kind == "race"
        }
    # Each kernel's race, whichever thread checked it; the checks' own kernels unseen.
    assert all(any(f.kind == "race" for f in c.findings) for c in beside.calls)


# Pallas' TPU interpreter's race reports, in each version's form (its `print` in jax
# 0.10's race_detection_state.py; its logged warning in 0.12).
_TPU_RACE_0_10 = """RACE DETECTED
  read of (0, 0, 103)[(slice(0, 8, None), slice(0, 128, None))] from 0, 0, /k.py:12:4 (body)
  clock: [1, 0]
  write of (0, 0, 103)[(slice(0, 8, None), slice(0, 128, None))] from 100, 0 /k.py:11:4 (body)
  clock: [0, 1]
"""
_TPU_RACE_0_12 = """RACE DETECTED
  write of ('vmem', 103, 0, 0)[()] from (100, 0), /k.py:11:4 (body)
  clock: <NpVectorClock object at 0x7f>
  read of ('vmem', 103, 0, 0)[()] from (0, 0), /k.py:12:17 (body)
  clock: <NpVectorClock object at 0x7f>
"""


@pytest.mark.parametrize("text", [_TPU_RACE_0_10, _TPU_RACE_0_12], ids=["jax-0.10", "jax-0.12"])
def test_tpu_race_reports_of_each_version_name_the_dma_and_the_core(text):
    from pallaslab._src.core.jax_adapter.gpu_interpret import parse_races
    from pallaslab._src.core.sanitizer.interpreted import _race_findings
    from pallaslab._src.records.sanitize import SanitizedCall

    base = SanitizedCall(
        kernel="k", primitive="pallas_call", source=None, nodeid="t", status="checked"
    )
    (finding,) = _race_findings(parse_races(text, unit="core"), "k", base, "tpu")
    # The write (the DMA's, at line 11) first, whichever the interpreter printed first.
    assert (finding.location.file, finding.location.line) == ("/k.py", 11)
    assert "a write by core 0 of device 100 (or a DMA" in finding.message
    assert "a read by core 0 at line 12" in finding.message


def _copy_rows_past_the_end(x_hbm, o_ref, semaphore):
    rows = x_hbm.at[pl.ds(jnp.int32(4), 8), 1]  # rows 4..11 of 8
    pltpu.async_copy(rows, o_ref, semaphore).wait()  # marks: dma read


def test_a_dma_reading_past_its_source_is_out_of_bounds_and_the_check_goes_on():
    def run(x):
        return pl.pallas_call(
            _copy_rows_past_the_end,
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            scratch_shapes=[pltpu.SemaphoreType.DMA],
            interpret=pltpu.InterpretParams(out_of_bounds_reads="uninitialized"),
        )(x)

    got, call = _sanitized(run, jnp.zeros((8, 4, 128), jnp.float32))
    # Oracle: rows 4..7 exist (zeros); rows 8..11 are past the end (NaN, as asked).
    np.testing.assert_array_equal(got[:4], 0.0)
    assert np.isnan(got[4:]).all()
    (finding,) = [f for f in call.findings if f.kind == "out-of-bounds"]
    assert finding.check == "bounds"
    assert "reaches elements 4..11 of dimension 0" in finding.message
    assert "Pallas' TPU interpreter stopped it" in finding.message
    assert finding.location.line == _line(_copy_rows_past_the_end, "dma read")
    assert call.agrees is True


def _write_into_padding(x_ref, o_ref, s_ref):
    pltpu.sync_copy(x_ref.at[0], s_ref.at[10])  # row 10 of 10: in a TPU's (16, 128) tiles
    o_ref[0, :] = s_ref[10, :]


def test_padded_buffers_are_checked_on_the_chip_the_test_set():
    def run(x):
        return pl.pallas_call(
            _write_into_padding,
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            scratch_shapes=[pltpu.VMEM((10, 128), jnp.float32)],
            interpret=pltpu.InterpretParams(buffer_bounds="padded"),
        )(x)

    chip = jax.sharding.AbstractMesh(
        (), (), abstract_device=jax.sharding.AbstractDevice("TPU v6e", 1, "tpu")
    )
    with jax.sharding.use_abstract_mesh(chip):
        got, call = _sanitized(run, jnp.zeros((8, 128), jnp.float32))
    # Oracle (JAX's own test of padded buffers): the write lands in the padding, and
    # the read of it gives what fills fresh memory.
    assert np.isnan(got).all()
    assert not [f for f in call.findings if f.kind == "out-of-bounds"]


def test_two_cores_copying_through_one_shared_buffer_race():
    # Both cores of a mesh copy through the one HBM buffer `run_scoped` allocates:
    # JAX's own test of this pattern expects its race detector to fire. The DMAs of
    # `sync_copy` carry no source line in jax 0.10: the race is still reported.
    mesh = pltpu.create_tensorcore_mesh("x", num_cores=2)

    def copy_through_shared(x):
        def inner(refs):
            x_ref, z_ref = refs

            @pl.core_map(
                mesh,
                interpret=pltpu.InterpretParams(allow_hbm_allocation_in_run_scoped=True),
            )
            def _():
                def body(shared_hbm):
                    pltpu.sync_copy(x_ref, shared_hbm)
                    pltpu.sync_copy(shared_hbm, z_ref)

                pl.run_scoped(body, pltpu.HBM(x.shape, x.dtype))

        _, z = pl.run_state(inner)((x, jnp.zeros_like(x)))
        return z

    _, call = _sanitized(
        copy_through_shared, jnp.arange(16 * 128, dtype=jnp.int32).reshape(16, 128)
    )
    races = [f for f in call.findings if f.kind == "race"]
    assert races and all(f.backend == "tpu" for f in races), call.findings
    assert "HBM" in races[0].message


def test_race_reports_without_a_source_line_are_races():
    from pallaslab._src.core.jax_adapter.gpu_interpret import parse_races

    text = (
        "RACE DETECTED\n  write of ('hbm', 102, 0, 0)[()] from 102, 0, \n  clock: [0 1 3 0]\n"
        "  read of ('hbm', 102, 0, 0)[()] from 101, 0, \n  clock: [5 0 5 0]\n"
    )
    ((write, read),) = parse_races(text)
    assert (write.access, write.memory, write.location) == ("write", "HBM", None)
    assert (read.access, read.thread) == ("read", "thread 0 of device 101")
