"""Mosaic GPU kernels on a machine without a GPU: traced for a chip, run in JAX's interpreter.

The kernels are `tests/mosaic_gpu_corpus.py`'s, one per style. Oracles: the chips' SM
counts and compute capabilities as NVIDIA publishes them (typed here, not read from
the hardware table), NumPy's answer for every run, lines of this file for findings,
and the SASS instructions a TMA copy or a tensor-core op must compile to.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

import pallaslab
from pallaslab._src.base import sources
from pallaslab._src.core import chips, gpu_toolchain, jax_adapter
from pallaslab._src.core.diagnose import diagnose
from pallaslab._src.core.jax_adapter import gpu_chips, gpu_interpret
from pallaslab._src.views.tabs import run as run_tab
from tests import mosaic_gpu_corpus as corpus

needs_gpu_compile = pytest.mark.skipif(
    gpu_toolchain.problem() is not None and os.environ.get("PALLASLAB_GPU_COMPILE") != "required",
    reason=f"needs pallaslab[gpu-compile]: {gpu_toolchain.problem()}",
)

# Published: SMs per GPU (NVIDIA's whitepapers; the B200's as its devices report it)
# and compute capabilities (developer.nvidia.com/cuda-gpus).
SMS = {"A100": 108, "H100": 132, "B200": 148}
CAPABILITY = {"A100": (8, 0), "H100": (9, 0), "B200": (10, 0)}

CASES = {case.name: case for case in corpus.cases()}


def _line_of(needle: str, file: str = __file__) -> int:
    for number, text in enumerate(sources.lines(file), 1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {file}")


# ---------------------------------------------------------------------------
# Device queries answer as the chip.


@pytest.mark.parametrize("chip", ["A100", "H100", "B200"])
def test_every_device_query_answers_as_the_chosen_gpu(chip):
    from jax.experimental.mosaic.gpu import core as mgpu_core
    from jax.extend import backend

    utils = importlib.import_module("jax.experimental.mosaic.gpu.utils")
    with gpu_chips.gpu_chip_scope(gpu_chips.GpuChip.named(chip)):
        # Where this JAX defines it (utils from 0.12, core before), as its callers look it up.
        infer_arch = getattr(utils, "_infer_arch", None) or mgpu_core._infer_arch
        (device,) = jax.devices()
        assert device.core_count == SMS[chip]
        assert device.compute_capability == "{}.{}".format(*CAPABILITY[chip])
        assert device.platform == "gpu" and chip in device.device_kind
        assert jax.local_devices()[0].core_count == SMS[chip]
        assert backend.get_default_device().core_count == SMS[chip]
        assert jax.sharding.get_abstract_mesh().abstract_device.num_cores == SMS[chip]
        assert tuple(infer_arch()) == CAPABILITY[chip]
        # Explicit CPU queries still get the real devices.
        assert jax.devices("cpu")[0].platform == "cpu"
    # Outside the scope, the CPU answers for itself again: it has no SM count.
    with pytest.raises(AttributeError):
        _ = jax.devices()[0].core_count


def test_a_stand_in_device_says_what_it_is_when_asked_more():
    with gpu_chips.gpu_chip_scope(gpu_chips.GpuChip.named("H100")):
        device = jax.devices()[0]
    with pytest.raises(AttributeError, match="stand-in for an H100"):
        _ = device.memory_stats


@pytest.mark.parametrize(("chip", "sms"), [("H100", 132), ("B200", 148), ("A100", 108)])
def test_a_persistent_grid_is_one_program_per_sm_of_the_chip(chip, sms):
    case = CASES["persistent_double"]
    inspection = pallaslab.inspect(case.fn, *case.args, chip=chip)
    assert inspection.kernels[0].grid == (sms,)
    assert (inspection.chip, inspection.chip_note) == (chip, "chosen")


def test_off_a_gpu_gpu_kernels_are_traced_for_an_h100_and_say_so():
    case = CASES["persistent_double"]
    inspection = pallaslab.inspect(case.fn, *case.args)
    assert inspection.kernels[0].grid == (132,)
    assert (inspection.chip, inspection.chip_note) == ("H100", "the default without a GPU")
    from pallaslab._src.views.header import header, summary_text

    assert "for H100 (the default without a GPU)" in header(inspection)["badges"]
    assert "traced for H100 (the default without a GPU)" in summary_text(inspection)


def test_jax_hopper_matmul_traces_for_the_sm_count_of_each_chip():
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hopper

    config = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2)
    a = jax.ShapeDtypeStruct((512, 256), jnp.float16)
    b = jax.ShapeDtypeStruct((256, 512), jnp.float16)

    def matmul(a, b):
        return hopper.matmul(a, b, None, config)

    for chip in (None, "B200"):
        inspection = pallaslab.inspect(matmul, a, b, chip=chip)
        # Its persistent grid: one program per SM (a cluster of one).
        assert inspection.kernels[0].grid == (SMS[chip or "H100"],)


def test_a_program_without_gpu_kernels_keeps_the_cpus_answers():
    asked = []

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    def fn(x):
        asked.append(jax.devices()[0].platform)  # a question, not about a GPU kernel
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    inspection = pallaslab.inspect(fn, jnp.zeros(8))
    assert asked == ["cpu"] and inspection.chip == ""
    assert inspection.run().mode == "emulated"


def test_an_unknown_chip_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown chip 'Z9'.*H100.*v5e"):
        pallaslab.inspect(
            CASES["persistent_double"].fn, *CASES["persistent_double"].args, chip="Z9"
        )


def test_a_tpu_chip_answers_tpu_lookups_the_same_way():
    from jax.experimental.pallas import tpu as pltpu

    seen = []

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    def fn(x):
        seen.append(pltpu.get_tpu_info().chip_version)
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            compiler_params=pltpu.CompilerParams(),
        )(x)

    inspection = pallaslab.inspect(fn, jnp.zeros((8, 128)), chip="v6e")
    assert "6" in str(seen[-1]) and (inspection.chip, inspection.chip_note) == ("v6e", "chosen")
    assert chips.choice_for("v6e") == chips.ChipChoice(tpu="v6e", chosen=True)


# ---------------------------------------------------------------------------
# Runs in JAX's Mosaic GPU interpreter, against NumPy.


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_kernel_runs_in_the_interpreter_and_matches_numpy(name):
    case = CASES[name]
    inspection = pallaslab.inspect(case.fn, *case.args, chip=case.chips[-1])
    if not case.interpretable():
        # Where JAX's interpreter cannot run it, the run fails with one clear sentence.
        with pytest.raises((RuntimeError, NotImplementedError)) as failed:
            inspection.run()
        found = diagnose(failed.value, lambda _: None)
        assert found.kind == "interpreter", found
        assert f"jax {jax.__version__}" in found.summary and "from 0.12" in found.hint
        return
    result = inspection.run(ref=case.reference)
    assert result.mode == "mosaic-gpu-interpret"
    assert result.comparison.ok, result.comparison
    np.testing.assert_allclose(
        result.values[0], case.reference(*case.args), rtol=case.rtol, atol=case.rtol
    )
    assert result.interpreter_races == () and result.out_of_bounds == ()
    assert all(
        "JAX's Mosaic GPU interpreter" in n for n in result.notices[: len(inspection.kernels)]
    )
    from pallaslab._src.views.tabs import overview

    gpu = overview.payload(inspection.with_result(result))["kernels"][0]["races"]["gpu"]
    assert gpu["sentences"] == [
        "GPU: no races: JAX's Mosaic GPU interpreter ran it with its race detector on and "
        "found none."
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_on_a_gpu_each_kernel_runs_compiled_and_matches_numpy(name):
    # benchmarks/gpu_mosaic.py (scripts/device-check) also compares it with the interpreter.
    case, here = CASES[name], chips.gpu_here()
    if here not in case.chips:
        pytest.skip(f"{name} is for {', '.join(case.chips)}, not {here}")
    inspection = pallaslab.inspect(case.fn, *case.args)
    assert inspection.chip == here and inspection.chip_note == "the GPU here"
    result = inspection.run(ref=case.reference)
    assert result.mode == "compiled" and result.comparison.ok, result.comparison


def racy(x):
    """Two warpgroups write one shared-memory buffer with nothing ordering them."""

    def body(x_ref, o_ref, smem):
        wg = lax.axis_index("t")
        smem[...] = x_ref[...] + wg.astype(jnp.float32)  # the racing write
        o_ref[...] = smem[...]  # the racing read

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        num_threads=2,
        thread_name="t",
        scratch_types=[plgpu.SMEM(x.shape, x.dtype)],
    )(x)


def test_the_interpreters_races_are_findings_at_their_lines():
    inspection = pallaslab.inspect(racy, jnp.arange(128.0))
    result = inspection.run()
    assert result.mode == "mosaic-gpu-interpret"
    write, read = _line_of("# the racing write"), _line_of("# the racing read")
    smem = [r for r in result.interpreter_races if r.memory == "SMEM"]
    assert smem, result.interpreter_races
    pairs = {
        frozenset({(r.accesses[0], r.location.line), (r.accesses[1], r.other_location.line)})
        for r in smem
    }
    assert frozenset({("write", write), ("read", read)}) in pairs
    assert all(r.kernel == "body" and r.location.file == __file__ for r in smem)
    assert "not ordered" in smem[0].describe()
    # The Run tab lists them with their lines; the header's summary names them.
    model = run_tab.payload(inspection.with_result(result))["result"]
    assert {race["where"]["line"] for race in model["interpreterRaces"]} >= {write, read}
    # The Kernels tab says them too, where the GPU's races are listed.
    from pallaslab._src.views.tabs import overview

    (kernel,) = overview.payload(inspection.with_result(result))["kernels"]
    gpu = kernel["races"]["gpu"]
    assert gpu["checked"] and any("race on a SMEM buffer" in t for t in gpu["sentences"])
    pair = {f"lines {write} and {read}", f"lines {read} and {write}"}
    assert any(any(p in t for p in pair) for t in gpu["sentences"])


def reads_past_the_end(x):
    def body(x_ref, o_ref):
        i = lax.axis_index("b")
        o_ref[pl.ds(i * 64, 64)] = x_ref[pl.ds(i * 64 + 32, 64)] + 1  # reads 32 too far

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
        grid=(2,),
        grid_names=("b",),
    )(x)


def test_an_out_of_bounds_read_is_a_finding_and_the_run_goes_on():
    result = pallaslab.inspect(reads_past_the_end, jnp.arange(128.0)).run()
    (found,) = result.out_of_bounds
    assert (found.cause, found.access, found.span, found.shape) == (
        "interpreter",
        "load",
        ((96, 159),),
        (128,),
    )
    assert found.location.line == _line_of("# reads 32 too far")
    # The last program's 32 elements past the end read NaN; the rest is right.
    values = result.values[0]
    assert np.isnan(values[96:]).all() and np.array_equal(values[:96], np.arange(32, 128) + 1)


def writes_past_the_end(x):
    def body(x_ref, o_ref):
        i = lax.axis_index("b")
        o_ref[pl.ds(i * 64 + 32, 64)] = x_ref[pl.ds(i * 64, 64)]  # writes 32 too far

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
        grid=(2,),
        grid_names=("b",),
    )(x)


def test_an_out_of_bounds_write_fails_at_its_line():
    inspection = pallaslab.inspect(writes_past_the_end, jnp.arange(128.0))
    with pytest.raises(RuntimeError) as failed:
        inspection.run()
    found = diagnose(failed.value, lambda f: "line" if f == __file__ else None)
    # Newer JAX names the elements (96..159); jax 0.10 only fails an assertion of the store.
    assert found.kind == "out-of-bounds", found
    assert "The kernel writes" in found.summary and "out of bounds" in found.summary


ROWS = 16


def stores_a_window_past_the_end(x):
    def body(x_gmem, o_gmem, x_smem, loaded):
        cta, wg = lax.axis_index("cta"), lax.axis_index("wg")
        mine = pl.ds(wg * ROWS, ROWS)
        window = pl.ds(cta * 2 * ROWS + wg * ROWS, ROWS)
        plgpu.copy_gmem_to_smem(x_gmem.at[window], x_smem.at[mine], loaded.at[wg])
        plgpu.barrier_wait(loaded.at[wg])
        x_smem[mine] = x_smem[mine] * 2
        plgpu.commit_smem()
        shifted = pl.ds(cta * 2 * ROWS + wg * ROWS + 8, ROWS)
        plgpu.copy_smem_to_gmem(x_smem.at[mine], o_gmem.at[shifted])  # 8 rows too far
        plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // (2 * ROWS),),
        grid_names=("cta",),
        num_threads=2,
        thread_name="wg",
        scratch_types=[
            plgpu.SMEM((2 * ROWS, x.shape[1]), x.dtype),
            plgpu.Barrier(num_arrivals=1, num_barriers=2),
        ],
    )(x)


def test_a_tma_window_past_the_end_is_a_finding_at_its_line():
    # JAX clamps the dynamic window, so the interpreter runs without a word; the
    # kernel's plan knows each CTA's window. By hand: CTA 1's second warpgroup stores
    # rows 1 * 32 + 16 + 8 = 56 .. 71 of a 64-row output.
    result = pallaslab.inspect(stores_a_window_past_the_end, jnp.ones((64, 128)), chip="H100").run()
    (found,) = result.out_of_bounds
    assert (found.cause, found.access, found.ref, found.shape) == (
        "copy-window",
        "store",
        "o_gmem",
        (64, 128),
    )
    assert found.span == ((56, 71), (0, 127)) and found.programs == ((1,),)
    assert found.location.line == _line_of("# 8 rows too far")
    assert "TMA unit drops the elements outside" in found.describe()


def whole_array_pallas_call(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=plgpu.CompilerParams(),
    )(x)


def windowed_pallas_call(x):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2,),
        in_specs=[pl.BlockSpec((64,), lambda i: (i,))],
        out_specs=pl.BlockSpec((64,), lambda i: (i,)),
        compiler_params=plgpu.CompilerParams(),
    )(x)


def test_pallas_call_with_mosaic_gpu_params_takes_the_interpreter_when_it_can():
    x = jnp.arange(128.0)
    whole = pallaslab.inspect(whole_array_pallas_call, x).run(ref=lambda x: x * 3)
    assert whole.mode == "mosaic-gpu-interpret" and whole.comparison.ok
    # BlockSpec windows: the interpreter takes whole arrays only; the emulator runs it.
    windowed = pallaslab.inspect(windowed_pallas_call, x).run(ref=lambda x: x * 3)
    assert windowed.mode == "emulated" and windowed.comparison.ok


def test_check_bench_and_emulate_run_mosaic_gpu_kernels_too():
    case = CASES["cluster_scale"]
    inspection = pallaslab.inspect(case.fn, *case.args)
    assert inspection.check(case.reference).ok
    np.testing.assert_allclose(
        pallaslab.emulate(case.fn)(*case.args), case.reference(*case.args), rtol=1e-6
    )
    from pallaslab._src.bench import live
    from pallaslab._src.bench.cells import bench_cell

    # Timed (a small kernel: the harness repeats it), labelled as interpretation.
    table = bench_cell(pallaslab.inspect(whole_array_pallas_call, jnp.arange(128.0)), live=False)
    assert set(table["note"]) == {live.MOSAIC_GPU_LABEL}
    assert "interpretation" in live.MOSAIC_GPU_LABEL and "emulation" not in live.MOSAIC_GPU_LABEL


def test_a_failing_thread_does_not_leave_the_others_waiting():
    # A compute warpgroup waits at a barrier for a memory warpgroup that never comes.
    def body(x_ref, o_ref, barrier):
        wg = lax.axis_index("t")

        @pl.when(wg == 0)
        def _():
            plgpu.barrier_wait(barrier)  # nobody arrives: the other thread failed
            o_ref[...] = x_ref[...]

        @pl.when(wg == 1)
        def _():
            o_ref[pl.ds(wg * 100, 64)] = x_ref[pl.ds(0, 64)]  # 100..163: out of bounds

    def fn(x):
        return plgpu.kernel(
            body,
            out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
            num_threads=2,
            thread_name="t",
            scratch_types=[plgpu.Barrier(num_arrivals=1)],
        )(x)

    inspection = pallaslab.inspect(fn, jnp.arange(128.0))
    with pytest.raises(RuntimeError) as failed:
        inspection.run()  # ends (before the guard, it waited forever)
    assert diagnose(failed.value, lambda _: None).kind == "out-of-bounds"
    # And the interpreter is usable again.
    case = CASES["cluster_scale"]
    assert pallaslab.inspect(case.fn, *case.args).run(ref=case.reference).comparison.ok


def test_where_jax_lacks_the_interpreter_one_sentence_names_the_version(monkeypatch):
    monkeypatch.setattr(gpu_interpret, "params_class", lambda: None)
    notice = gpu_interpret.unavailable()
    assert f"jax {jax.__version__} has no Mosaic GPU interpreter" in notice
    assert f"jax {gpu_interpret.SINCE}" in notice
    assert "\n" not in notice and ". " not in notice and notice.endswith(".")  # one sentence
    with pytest.raises(NotImplementedError, match="has no Mosaic GPU interpreter"):
        gpu_interpret.make_params()


def test_race_reports_are_read_from_either_form():
    # 0.10.2 prints them; 0.12 logs them (`on_race="warn"`): the same lines either way.
    report = (
        "RACE DETECTED\n  write of HostAllocationKey(memory_space_id=1, device_id=0, "
        "thread_id=0, initial_ref_count=2, buffer_id=102)[()] from 0, 1, /k.py:11:4 (body)\n"
        "  clock: [0 2 0]\n  read of HostAllocationKey(memory_space_id=1, device_id=0, "
        "thread_id=0, initial_ref_count=2, buffer_id=102)[()] from 0, 0 /k.py:12:17 (body)\n"
        "  clock: [3 0 0]\n"
    )
    ((a, b),) = gpu_interpret.parse_races(report)
    assert (a.access, a.memory, a.thread, a.location.line) == ("write", "SMEM", "thread 1", 11)
    assert (b.access, b.thread, b.location.file, b.location.line) == (
        "read",
        "thread 0",
        "/k.py",
        12,
    )
    # jax 0.12 names warpgroups.
    newer = (
        "RACE DETECTED\n  write of HostAllocationKey(memory_space_id=1, device_id=0, "
        "block_id=0, thread_id=0, initial_ref_count=2, buffer_id=7)[(slice(0, 8, None),)] "
        "from Warpgroup(device_id=0, cluster_id=0, block_id=3, warpgroup_id=1), "
        "/k.py:20:8 (body)\n  clock: [0 2]\n  read of HostAllocationKey(memory_space_id=1,"
        " device_id=0, block_id=0, thread_id=0, initial_ref_count=2, buffer_id=7)"
        "[(slice(0, 8, None),)] from Warpgroup(device_id=0, cluster_id=0, block_id=3, "
        "warpgroup_id=0), /k.py:21:8 (body)\n  clock: [3 0]\n"
    )
    ((a, b),) = gpu_interpret.parse_races(newer)
    assert (a.thread, a.memory, a.location.line) == ("warpgroup 1 of block 3", "SMEM", 20)
    assert (b.access, b.thread, b.location.line) == ("read", "warpgroup 0 of block 3", 21)


# ---------------------------------------------------------------------------
# Lowered to SASS for each chip, by XLA's own compile.


@needs_gpu_compile
@pytest.mark.parametrize(
    ("name", "chip"),
    [(case.name, chip) for case in corpus.cases() for chip in case.chips],
)
def test_each_kernel_lowers_to_sass_with_its_instructions(name, chip):
    case = CASES[name]
    lowered = pallaslab.inspect(case.fn, *case.args, chip=chip).lower(f"xla-gpu:{chip}")
    assert lowered.ok, lowered.error
    mnemonics = {line.split()[0].split(".")[0] for line in _instructions(lowered.text)}
    missing = set(case.sass[chip]) - mnemonics
    assert not missing, (missing, sorted(mnemonics))


@needs_gpu_compile
def test_jax_hopper_matmul_lowers_to_wgmma_for_an_h100():
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hopper

    config = hopper.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=2)
    half = jax.ShapeDtypeStruct((512, 512), jnp.float16)
    inspection = pallaslab.inspect(lambda a, b: hopper.matmul(a, b, None, config), half, half)
    lowered = inspection.lower("xla-gpu:H100")
    assert lowered.ok, lowered.error
    assert any(line.startswith("HGMMA") for line in _instructions(lowered.text))


def _instructions(text: str) -> list[str]:
    """SASS instruction lines without their address comment and predicate."""
    found = []
    for line in text.splitlines():
        body = line.strip()
        if body.startswith("/*"):
            body = body.split("*/", 1)[-1].strip()
        if body.startswith("@"):
            body = body.split(None, 1)[-1] if " " in body else ""
        if body[:1].isupper():
            found.append(body)
    return found


# ---------------------------------------------------------------------------
# The API JAX writes now, and its deprecations as notices.


def test_deprecations_met_while_tracing_become_notices():
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    def old_names(x):  # plgpu.kernel(out_shape=) is deprecated for out_type=
        return plgpu.kernel(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    if "out_shape" in inspect.signature(plgpu.kernel).parameters:  # jax 0.10 and 0.11
        inspection = pallaslab.inspect(old_names, jnp.zeros(128))
        assert any("out_type" in n and f"jax {jax.__version__}" in n for n in inspection.notices)
    else:  # 0.12: the old name is gone, the error says where
        with pytest.raises(TypeError, match="out_shape"):
            pallaslab.inspect(old_names, jnp.zeros(128))
    new = pallaslab.inspect(lambda x: plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype))(x), jnp.zeros(128))  # fmt: skip
    assert not any("deprecated" in n for n in new.notices)


def test_core_maps_deprecation_is_a_notice_where_jax_deprecates_it():
    def fn(x):
        @pl.run_state
        def copy(refs):
            x_ref, o_ref = refs

            @pl.core_map(plgpu.Mesh())  # deprecated for pl.kernel from jax 0.12
            def _():
                o_ref[...] = x_ref[...]

        return copy((x, jnp.zeros_like(x)))[1]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _ = pl.core_map
    deprecated = any(issubclass(w.category, DeprecationWarning) for w in caught)
    inspection = pallaslab.inspect(fn, jnp.zeros(128))
    assert inspection.kernels[0].kind == "plgpu.kernel"
    assert any("core_map" in n and "deprecated" in n for n in inspection.notices) == deprecated


def test_a_triton_kernel_under_a_jax_that_deprecates_it_gets_one_notice(monkeypatch):
    from jax.experimental.pallas import triton as pltriton

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

    def fn(x):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            compiler_params=pltriton.CompilerParams(num_warps=4),
        )(x)

    # The probe of JAX's deprecation registry is pinned in test_jax_adapter.py.
    monkeypatch.setattr(jax_adapter, "triton_deprecation", lambda: "")
    assert not any("Triton" in n for n in pallaslab.inspect(fn, jnp.zeros(128)).notices)
    said = "Pallas' Triton backend (pltriton.CompilerParams) is deprecated in jax 0.11."
    monkeypatch.setattr(jax_adapter, "triton_deprecation", lambda: said)
    notices = [n for n in pallaslab.inspect(fn, jnp.zeros(128)).notices if "Triton" in n]
    assert len(notices) == 1
    assert notices[0].startswith(f"kernel: {said}") and "plgpu.kernel" in notices[0]
    # A Mosaic GPU kernel gets none.
    mosaic = pallaslab.inspect(whole_array_pallas_call, jnp.zeros(128))
    assert not any("Triton" in n for n in mosaic.notices)


def test_the_run_tab_says_why_it_was_not_run():
    case = CASES["cluster_scale"]
    inspection = pallaslab.inspect(case.fn, *case.args)
    assert run_tab.payload(inspection)["message"].startswith("Not run: only traced")
    told = dataclasses.replace(inspection, not_run="--no-run was given")
    assert run_tab.payload(told)["message"] == "Not run: --no-run was given."


# ---------------------------------------------------------------------------
# The course's grading runs a Mosaic GPU kernel through the interpreter.


def _half_doubler(x, *, both: bool = True):
    """An exercise-shaped answer: each of two programs doubles its half of x."""
    half = x.shape[0] // 2

    def body(x_ref, o_ref):
        i = lax.axis_index("b")
        window = pl.ds(i * half, half)

        @pl.when(jnp.logical_or(i == 0, both))
        def _():
            o_ref[window] = x_ref[window] * 2  # the answer's line

    return plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2,), grid_names=("b",)
    )(x)


def test_an_exercise_grades_a_mosaic_gpu_kernel_in_the_interpreter():
    from pallaslab._src.course import grading
    from pallaslab._src.course.catalog._helpers import case, f32
    from pallaslab._src.course.spec import Exercise

    exercise = Exercise(
        id="99.double",
        notebook="99_test",
        title="Double it on a GPU mesh",
        task="Write double(x): 2 * x, each of two programs doing its half.",
        reference=lambda x: 2 * x,
        cases=(case(f32(256)), case(f32(512))),
        hint="Each program writes its half of the output.",
    )
    solved = grading.grade(exercise, _half_doubler)
    assert solved.ok and solved.kind == "solved", solved
    assert all(p.result.mode == "mosaic-gpu-interpret" for p in solved.check.points)

    wrong = grading.grade(exercise, lambda x: _half_doubler(x, both=False))
    assert not wrong.ok and wrong.kind == "wrong-values", wrong
    # The output's second half is never written: the interpreter's fresh memory is NaN.
    point = wrong.check.points[0]
    assert point.comparison.tiles and point.comparison.tiles[0].nan_count == 128
    assert "wrong in" in wrong.cases[0].summary and "128 NaN" in wrong.cases[0].summary


def test_a_static_slice_past_its_ref_is_explained_at_its_line():
    # jax 0.12 refuses these while tracing (0.10 let masked lanes hang over the end).
    from pallaslab._src.core.diagnose_matchers import MATCHERS

    error = ValueError("Out of bound slice: start=0, size=128, stride=1, dim=100.")
    found = next(d for m in MATCHERS if (d := m(error, ())) is not None)
    assert found.kind == "slice-out-of-bounds"
    assert "elements 0..127" in found.summary and "ref of 100" in found.summary
    assert "jax 0.12" in found.hint
