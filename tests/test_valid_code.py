"""Valid Pallas that pallaslab refused (issue 11, items 5-9), and how it is taken now.

Element-padded (and bounded, squeezed) blocks in the block pre-check; the chosen TPU
answering every chip lookup while tracing and lowering; `pltpu.emit_pipeline`
kernels on a CPU; `pl.kernel` / `pl.core_map` on a TPU mesh; races that read
scalar-prefetch values; the magic running calls on `jax.ShapeDtypeStruct`s. Each
test has its own oracle: a jnp reference, Pallas' own interpret mode, brute force,
or an answer worked out by hand.
"""

from __future__ import annotations

import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallaslab
from pallaslab._src.core import chips, seeded, tiling
from pallaslab._src.core.jax_adapter import chips as adapter_chips
from pallaslab._src.core.lowering import tpu_compile
from pallaslab._src.course import requirements
from pallaslab._src.geometry.blocks import stray_blocks
from pallaslab._src.geometry.races import find_races
from pallaslab._src.records import indexmap as ix
from pallaslab._src.views.static_page import static_tab
from pallaslab._src.views.tabs import overview
from pallaslab._src.views.tabs import run as run_tab
from tests import corpus, records
from tests.test_magic import error_of, line_of, run

S = jax.ShapeDtypeStruct
needs_libtpu = pytest.mark.skipif(
    not tpu_compile.libtpu_version(), reason="needs libtpu (pallaslab[tpu])"
)

PRELUDE = """\
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
"""


def magic(ip, line: str, body: str):
    """Runs a %%kernel cell after the prelude; returns (result, inspection)."""
    result, _ = run(ip, line, PRELUDE + textwrap.dedent(body))
    return result, ip.user_ns.get("_kernel")


# ---------------------------------------------------------------------------------
# 5. Blocks: exactly as permissive as Pallas, still catching a block wholly outside.

KINDS = ("blocked", "squeezed", "element", "bounded")


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    n=st.integers(1, 40),
    size=st.integers(1, 12),
    index=st.integers(-30, 50),
    low=st.integers(0, 5),
    high=st.integers(0, 5),
    length=st.integers(1, 12),
)
def test_stray_blocks_agree_with_brute_force(kind, n, size, index, low, high, length):
    """A block strays iff no element it covers is one Pallas addresses (brute force)."""
    padding = ((low, high),) if kind == "element" else ()
    sizes: tuple = ()
    if kind == "squeezed":
        block: tuple = (None,)
        covered = {index}
    elif kind == "blocked":
        block = (size,)
        covered = set(range(index * size, index * size + size))
    elif kind == "element":
        block = (size,)
        # The index is an element offset into the array padded by `low` in front.
        covered = set(range(index - low, index - low + size))
    else:
        length = min(length, size)
        block = (size,)
        sizes = (ix.const(length),)
        covered = set(range(index, index + length))
    addressed = set(range(-low, n + high)) if kind == "element" else set(range(n))
    op = records.operand(
        (n,), block, [ix.const(index)], kinds=[kind], sizes=sizes, element_padding=padding
    )
    found = stray_blocks(records.kernel((1,), op))
    assert bool(found) == (not covered & addressed), (kind, n, size, index, padding)
    if found:
        (stray,) = found
        assert stray.start[0] == min(covered) and stray.size == len(covered)


def _halo_cell(index_map: str, rows: int = 64) -> str:
    return f"""
    ROWS = {rows}

    def stencil_kernel(x_ref, o_ref):
        i = pl.program_id(0)
        rows = i * 8 - 1 + jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0)
        x = jnp.where((rows >= 0) & (rows < ROWS), x_ref[...], 0.0)
        o_ref[...] = x[:-2] + x[1:-1] + x[2:]

    stencil = pl.pallas_call(
        stencil_kernel,
        out_shape=jax.ShapeDtypeStruct((ROWS, 128), jnp.float32),
        grid=(ROWS // 8,),
        in_specs=[pl.BlockSpec((pl.Element(10, (1, 1)), pl.Element(128)), {index_map})],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
    )
    x = jnp.arange(ROWS * 128, dtype=jnp.float32).reshape(ROWS, 128) % 7
    """


def _stencil_reference(x):
    padded = jnp.pad(x, ((1, 1), (0, 0)))
    return padded[:-2] + padded[1:-1] + padded[2:]


def test_the_magic_takes_element_padded_blocks(ip):
    # Program 0's block starts in the padding (element -1 of x), the last one ends
    # in it: Pallas reads the padding; the pre-check used to refuse the first.
    ip.user_ns["reference"] = _stencil_reference
    result, inspection = magic(ip, "stencil(x) --ref reference", _halo_cell("lambda i: (i * 8, 0)"))
    assert result.success, result.error_in_exec
    operand = inspection.kernels[0].operands[0]
    assert operand.block_kinds == ("element", "element")
    assert operand.element_padding == ((1, 1), (0, 0))
    assert inspection.result.comparison.ok
    # Pallas' own interpreter agrees with the run.
    interpreted = pallaslab.emulate(ip.user_ns["stencil"], interpret=True)(ip.user_ns["x"])
    np.testing.assert_array_equal(inspection.result.values[0], np.asarray(interpreted))


def test_the_magic_still_stops_an_element_block_wholly_outside(ip):
    # The last program's block starts at padded element 8*8+10 = 74 > 64 + 2 - 1.
    body = _halo_cell("lambda i: (i * 8 + (i == 7) * 10, 0)")
    result, _ = magic(ip, "stencil(x)", body)
    error = error_of(result)
    text = error.diagnosis.message()
    assert "program (7,)" in text and "padded by 1 before and 1 after" in text
    assert f"Cell line {line_of(PRELUDE + textwrap.dedent(body), 'in_specs=')}" in text


def test_bounded_slices_are_checked_by_their_start_and_size(ip):
    cell = """
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    def make(start):
        return pl.pallas_call(
            k, out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32), grid=(8,),
            in_specs=[pl.BlockSpec((pl.BoundedSlice(8), 128), lambda i: (pl.ds(start(i), 8), 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))

    inside = make(lambda i: i * 8 - 4)   # program 0 reads rows -4..3: half inside
    outside = make(lambda i: i * 8 + 8)  # program 7 reads rows 64..71: none
    x = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    """
    result, inspection = magic(ip, "inside(x) --no-run", cell)
    assert result.success, result.error_in_exec
    assert inspection.kernels[0].operands[0].block_kinds == ("bounded", "blocked")
    result, _ = magic(ip, "outside(x) --no-run", cell)
    assert "covers elements 64..71 of dimension 0" in error_of(result).diagnosis.message()


def test_one_stray_block_check_reads_prefetch_values_of_the_call():
    # Block 9 of 8: only the prefetch table says so.
    case = corpus.scatter_blocks((3, 0, 6, 1, 7, 2, 5, 9))
    inspection = pallaslab.inspect(case.fn, *case.args)
    ((kernel, stray),) = tiling.stray_blocks(inspection)
    assert (kernel.name, stray.operand.role, stray.program, stray.start) == (
        "kernel",
        "out",
        (7,),
        (72, 0),
    )
    # Another table for the same program: no stray block.
    good = jnp.arange(8, dtype=jnp.int32)
    assert tiling.stray_blocks(inspection, [good, case.args[1]]) == []


# ---------------------------------------------------------------------------------
# 6. The chosen chip answers every lookup, while tracing and while lowering.


def _sign_kernel(x_ref, o_ref):
    o_ref[...] = jnp.sign(x_ref[...])


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("chip", ["v5e", "v4", "v6e"])
def test_sign_lowers_for_tpu_chips(dtype, chip):
    # jnp.sign's TPU rule asks which chip it lowers for (native bf16 from v4 on).
    fn = pl.pallas_call(_sign_kernel, out_shape=S((16, 128), dtype))
    lowered = pallaslab.inspect(fn, S((16, 128), dtype)).lower(f"mosaic-tpu:{chip}")
    assert lowered.ok, lowered.error
    # sign(x) = 1.0 with x's sign bit: 0x3F800000 in f32, 0x3F80 in native bf16.
    one = "1065353216" if dtype == jnp.float32 else "16256"
    assert re.search(rf"arith\.constant {one} : i(32|16)", lowered.text), lowered.text


@needs_libtpu
def test_sign_compiles_with_libtpu():
    fn = pl.pallas_call(_sign_kernel, out_shape=S((16, 128), jnp.float32))
    lowered = pallaslab.inspect(fn, S((16, 128), jnp.float32)).lower("tpu-compile:v5e")
    assert lowered.ok, lowered.error
    assert lowered.resources.bundles and lowered.resources.bundles > 0


def _mxu_kernel(x_ref, o_ref):
    # Decided while tracing, from the chip: the MXU is 128 wide before v6e, 256 from it.
    o_ref[...] = x_ref[...] + float(pltpu.get_tpu_info().mxu_column_size)


def _int8_matmul_kernel(a_ref, b_ref, o_ref):
    # Also decided while tracing: int8 x int8 on the MXU from v5 on, not on 7x.
    a, b = a_ref[...], b_ref[...]
    if pltpu.get_tpu_info().is_matmul_supported(jnp.int8, jnp.int8):
        o_ref[...] = jnp.dot(a, b, preferred_element_type=jnp.int32).astype(jnp.float32)
    else:
        o_ref[...] = jnp.dot(
            a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32
        )


def test_each_tpu_target_is_traced_for_its_chip():
    fn = pl.pallas_call(_mxu_kernel, out_shape=S((8, 128), jnp.float32))
    inspection = pallaslab.inspect(fn, S((8, 128), jnp.float32))
    widths = {"v5e": "1.280000e+02", "v4": "1.280000e+02", "v6e": "2.560000e+02"}
    for chip, width in widths.items():
        lowered = inspection.lower(f"mosaic-tpu:{chip}")
        assert lowered.ok, lowered.error
        assert f"arith.constant {width} : f32" in lowered.text, chip

    mm = pl.pallas_call(_int8_matmul_kernel, out_shape=S((128, 128), jnp.float32))
    inspection = pallaslab.inspect(mm, S((128, 128), jnp.int8), S((128, 128), jnp.int8))

    def matmul_operands(chip):
        lowered = inspection.lower(f"mosaic-tpu:{chip}")
        assert lowered.ok, lowered.error
        (line,) = [t for t in lowered.text.splitlines() if "tpu.matmul" in t]
        return line.split(" : ")[-1]

    assert "vector<128x128xi8>, vector<128x128xi8>" in matmul_operands("v5e")
    assert "vector<128x128xbf16>, vector<128x128xbf16>" in matmul_operands("7x")


def test_tracing_uses_the_tpu_generation_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTERLAB_SETTINGS_DIR", str(tmp_path / "user-settings"))
    monkeypatch.setenv("JUPYTERLAB_DIR", str(tmp_path / "app"))
    fn = pl.pallas_call(_mxu_kernel, out_shape=S((8, 128), jnp.float32))
    x = jnp.zeros((8, 128), jnp.float32)
    assert chips.traced_chip() == "v5e"
    assert float(pallaslab.inspect(fn, x).run(x).values[0][0, 0]) == 128.0
    user = tmp_path / "user-settings" / "pallaslab" / "plugin.jupyterlab-settings"
    user.parent.mkdir(parents=True)
    user.write_text('{"tpuGeneration": "v6e"}', encoding="utf-8")
    assert chips.traced_chip() == "v6e"
    assert float(pallaslab.inspect(fn, x).run(x).values[0][0, 0]) == 256.0


def test_outside_pallaslab_jax_answers_for_itself():
    adapter_chips.install()
    assert not pltpu.is_tpu_device()
    with pytest.raises(ValueError, match="Unsupported TPU device kind: cpu"):
        pltpu.get_tpu_info()
    with adapter_chips.chip_scope("v6e"):
        assert pltpu.get_tpu_info().chip_version.value == "v6e"
        assert pltpu.is_tpu_device()
    with chips.tracing_chip("v4"):
        assert pltpu.get_tpu_info().chip_version.value == "v4"
        # "Am I on a TPU?" stays truthful while tracing off a TPU.
        assert not pltpu.is_tpu_device()
    # JAX's own cache was not filled with the chosen chips.
    with pytest.raises(ValueError, match="Unsupported TPU device kind: cpu"):
        pltpu.get_tpu_info()


def test_the_code_s_own_abstract_tpu_device_wins_while_tracing():
    device = jax.sharding.AbstractDevice(device_kind="TPU v6 lite", num_cores=1, platform="tpu")
    mesh = jax.sharding.AbstractMesh(
        (1,), ("x",), (jax.sharding.AxisType.Auto,), abstract_device=device
    )
    with chips.tracing_chip("v4"), jax.sharding.use_abstract_mesh(mesh):
        assert pltpu.get_tpu_info().chip_version.value == "v6e"
    with adapter_chips.chip_scope("v4"), jax.sharding.use_abstract_mesh(mesh):
        assert pltpu.get_tpu_info().chip_version.value == "v4"  # a target's chip


# ---------------------------------------------------------------------------------
# 7. pltpu.emit_pipeline kernels: traced for the chosen chip, run, shown, lowered.

PIPELINE_CELL = """
def add_kernel(x_hbm, y_hbm, o_hbm):
    def add_block(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    block = pl.BlockSpec((64, 128), lambda i: (i, 0))
    pltpu.emit_pipeline(add_block, grid=(8,), in_specs=[block, block], out_specs=block)(
        x_hbm, y_hbm, o_hbm)

anywhere = pl.BlockSpec(memory_space=pl.ANY)
add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((512, 128), jnp.float32),
                     in_specs=[anywhere, anywhere], out_specs=anywhere)
x = jnp.arange(512 * 128, dtype=jnp.float32).reshape(512, 128)
y = jnp.cos(x)
out = add(x, y)   # the cell itself runs the kernel on CPU
"""


def test_emit_pipeline_kernels_run_in_the_magic(ip):
    result, inspection = magic(ip, 'add(x, y) --ref "x + y"', PIPELINE_CELL)
    assert result.success, result.error_in_exec
    x, y = ip.user_ns["x"], ip.user_ns["y"]
    np.testing.assert_allclose(np.asarray(ip.user_ns["out"]), np.asarray(x + y), rtol=1e-6)
    (kernel,) = inspection.kernels
    assert [o.memory_space for o in kernel.operands] == ["any", "any", "any"]
    assert "dma_start" in kernel.jaxpr
    run_result = inspection.result
    assert run_result.mode == "interpret" and run_result.comparison.ok
    assert any("DMAs" in n for n in run_result.notices)
    # Every tab builds; the accesses of a DMA kernel stop where the DMA starts.
    from pallaslab._src.views.inspector import Inspector

    Inspector(inspection)
    accesses = inspection.accesses()
    assert not accesses.complete and "dma_start" in accesses.notices[0]


def test_emit_pipeline_kernels_lower_for_tpu(ip):
    result, inspection = magic(ip, "add(x, y) --no-run --target mosaic-tpu:v5e", PIPELINE_CELL)
    assert result.success, result.error_in_exec
    lowered = inspection.lower("mosaic-tpu:v5e")
    assert lowered.ok, lowered.error
    assert "tpu.enqueue_dma" in lowered.text and "arith.addf" in lowered.text


@needs_libtpu
def test_emit_pipeline_kernels_compile_with_libtpu():
    case = corpus.pipelined_add()
    lowered = pallaslab.inspect(case.fn, *case.args).lower("tpu-compile:v5e")
    assert lowered.ok, lowered.error
    assert lowered.resources.bundles > 0


def test_emit_pipeline_inside_a_mesh_kernel_runs_and_lowers():
    def body(x_hbm, o_hbm):
        def block(x_ref, o_ref):
            o_ref[...] = jnp.maximum(x_ref[...], 0.0) * 3.0

        spec = pl.BlockSpec((32, 128), lambda i: (i, 0))
        pltpu.emit_pipeline(block, grid=(4,), in_specs=[spec], out_specs=spec)(x_hbm, o_hbm)

    @jax.jit
    def relu3(x):
        mesh = pltpu.create_tensorcore_mesh("core")
        return pl.kernel(body, out_type=S(x.shape, x.dtype), mesh=mesh)(x)

    x = jnp.linspace(-4.0, 4.0, 128 * 128, dtype=jnp.float32).reshape(128, 128)
    inspection = pallaslab.inspect(relu3, x)
    result = inspection.run(x, ref=lambda a: jnp.maximum(a, 0.0) * 3.0)
    assert result.comparison.ok and result.mode == "interpret"
    # pallaslab.emulate runs it as well (Pallas' interpreter), on the chosen chip.
    np.testing.assert_array_equal(
        np.asarray(pallaslab.emulate(relu3)(x)), np.asarray(jnp.maximum(x, 0.0) * 3.0)
    )
    assert inspection.lower("mosaic-tpu:v6e").ok


# ---------------------------------------------------------------------------------
# 8. Mesh kernels: classified by their mesh, lowered for its targets, run on CPU.


def _copy_scale_body(x_hbm, o_hbm, buf, sem):
    copy_in = pltpu.make_async_copy(x_hbm, buf, sem)
    copy_in.start()
    copy_in.wait()
    buf[...] = buf[...] * 2.0 + 1.0
    copy_out = pltpu.make_async_copy(buf, o_hbm, sem)
    copy_out.start()
    copy_out.wait()


def _tpu_mesh_kernel(x):
    mesh = pltpu.create_tensorcore_mesh("core")
    return pl.kernel(
        _copy_scale_body,
        out_type=S(x.shape, x.dtype),
        mesh=mesh,
        scratch_types=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA],
    )(x)


def test_a_tpu_mesh_kernel_is_a_tpu_kernel():
    x = jnp.arange(16 * 128, dtype=jnp.float32).reshape(16, 128)
    inspection = pallaslab.inspect(_tpu_mesh_kernel, x)
    (kernel,) = inspection.kernels
    assert (kernel.kind, kernel.backend) == ("pl.kernel", "mosaic_tpu")
    assert [o.role for o in kernel.operands] == ["in", "out", "scratch", "scratch"]
    # The Kernels tab and the IR tab say so.
    (shown,) = overview.payload(inspection)["kernels"]
    assert (shown["kind"], shown["backend"]) == ("pl.kernel", "mosaic_tpu")
    assert shown["kindText"] == "pl.kernel on a TPU mesh (Mosaic TPU)"
    assert "pl.kernel on a TPU mesh (Mosaic TPU), grid (1)" in static_tab(inspection, "overview")
    from pallaslab._src.views.tabs import ir

    assert ir.default_target(kernel) == "mosaic-tpu:v5e"
    # Its targets are TPU ones; GPU ones say why not, at the call.
    lowered = inspection.lower("mosaic-tpu:v5e")
    assert lowered.ok, lowered.error
    assert "tpu.enqueue_dma" in lowered.text
    for target in ("mosaic-gpu", "triton", "ptx:sm_90"):
        refused = inspection.lower(target)
        assert not refused.ok
        assert "TPU kernel" in refused.error.message
        assert "'mosaic-tpu' and 'tpu-compile'" in refused.error.message
        assert refused.error.location is not None
    # It runs on CPU, in Pallas' TPU interpreter, with the right answer.
    result = inspection.run(x, ref=lambda a: a * 2.0 + 1.0)
    assert result.comparison.ok and result.mode == "interpret"
    assert "TPU interpreter" in result.notices[0]


@needs_libtpu
def test_a_tpu_mesh_kernel_compiles_with_libtpu():
    inspection = pallaslab.inspect(_tpu_mesh_kernel, S((16, 128), jnp.float32))
    lowered = inspection.lower("tpu-compile:v5e")
    assert lowered.ok, lowered.error


def test_core_map_on_a_tpu_mesh():
    @jax.jit
    def add_one(x):
        mesh = pltpu.create_tensorcore_mesh("core")

        def stateful(refs):
            x_ref, o_ref = refs

            @pl.core_map(mesh, scratch_shapes=[pltpu.VMEM(x.shape, x.dtype)])
            def _(buf):
                pltpu.sync_copy(x_ref, buf)
                buf[...] = buf[...] + 1.0
                pltpu.sync_copy(buf, o_ref)

        _, out = pl.run_state(stateful)((x, jnp.zeros_like(x)))
        return out

    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    inspection = pallaslab.inspect(add_one, x)
    (kernel,) = inspection.kernels
    assert (kernel.kind, kernel.backend) == ("pl.core_map", "mosaic_tpu")
    assert [o.role for o in kernel.operands[:3]] == ["in", "out", "scratch"]
    result = inspection.run(x, ref=lambda a: a + 1.0)
    assert result.comparison.ok, result.comparison
    assert inspection.lower("mosaic-tpu:v5e").ok
    assert "only the 'mosaic-tpu'" in inspection.lower("mosaic-gpu").error.message


def test_gpu_mesh_kernels_stay_mosaic_gpu():
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    @jax.jit
    def double(x):
        return plgpu.kernel(body, out_type=S((256,), jnp.float32), grid=(2,), grid_names=("x",))(x)

    inspection = pallaslab.inspect(double, S((256,), jnp.float32))
    (kernel,) = inspection.kernels
    assert (kernel.kind, kernel.backend) == ("plgpu.kernel", "mosaic_gpu")
    assert overview.kind_text(kernel) == "plgpu.kernel on a GPU mesh (Mosaic GPU)"
    message = inspection.lower("mosaic-tpu:v5e").error.message
    assert "only the 'mosaic-gpu' and 'xla-gpu:<chip>' targets take it" in message
    result = inspection.run(ref=lambda a: a * 2)  # on CPU: Pallas' interpreter
    assert result.comparison.ok


def test_the_magic_runs_a_tpu_mesh_kernel_and_explains_a_wrong_one(ip):
    cell = """
    def body(x_hbm, o_hbm, buf, sem):
        pltpu.async_copy(x_hbm, buf, sem).wait()
        buf[...] = jnp.sign(buf[...])
        pltpu.async_copy(buf, o_hbm, sem).wait()

    def sign(x):
        mesh = pltpu.create_tensorcore_mesh("core")
        return pl.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh,
                         scratch_types=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA])(x)

    def wrong(x):  # reads HBM directly: no TPU can
        mesh = pltpu.create_tensorcore_mesh("core")
        def direct(x_hbm, o_hbm):
            o_hbm[...] = x_hbm[...]
        return pl.kernel(direct, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)(x)

    x = jnp.linspace(-1.0, 1.0, 8 * 128, dtype=jnp.float32).reshape(8, 128)
    """
    result, inspection = magic(ip, 'sign(x) --ref "jnp.sign(x)" --target tpu-compile:v5e', cell)
    assert result.success, result.error_in_exec
    assert inspection.result.comparison.ok
    assert inspection.kernels[0].kind == "pl.kernel"
    result, _ = magic(ip, "wrong(x)", cell)
    assert "HBM or ANY cannot be referenced directly" in error_of(result).diagnosis.message()


# ---------------------------------------------------------------------------------
# 9. Races read the example inputs' prefetch values; calls on shapes run in the magic.


def test_races_use_the_prefetch_values_of_the_inspection():
    # Programs 2 and 6 both write output block 5 (worked out from the table).
    case = corpus.scatter_blocks((3, 0, 5, 1, 7, 2, 5, 4))
    inspection = pallaslab.inspect(case.fn, *case.args)
    kernel = inspection.kernels[0]
    with pytest.raises(ValueError, match="scalar-prefetch"):
        find_races(kernel, "gpu")  # the bare record cannot know the table
    (conflict,) = inspection.races(0, "gpu")
    assert (conflict.operand, conflict.block, conflict.programs) == ("o_ref", (5, 0), ((2,), (6,)))
    assert find_races(kernel, "gpu", prefetch=[np.asarray(case.args[0])]) == [conflict]
    # One program at a time on TPU: no two write at once, but block 5 is left and
    # revisited, and TPU does not read an output block back.
    assert [c.kind for c in inspection.races(0, "tpu")] == ["revisit"]
    # A permutation races nowhere.
    clean = corpus.scatter_blocks()
    assert pallaslab.inspect(clean.fn, *clean.args).races(0, "gpu") == []


def test_the_kernels_tab_and_grading_find_prefetch_races():
    case = corpus.scatter_blocks((3, 0, 5, 1, 7, 2, 5, 4))
    inspection = pallaslab.inspect(case.fn, *case.args)
    races = overview.payload(inspection)["kernels"][0]["races"]
    assert races["gpu"]["checked"] and races["gpu"]["total"] == 1
    assert races["gpu"]["conflicts"][0]["programs"] == [[2], [6]]
    message = requirements.race_free("gpu").test(inspection)
    assert message and "o_ref" in message
    clean = corpus.scatter_blocks()
    assert requirements.race_free("gpu").test(pallaslab.inspect(clean.fn, *clean.args)) == ""


def test_the_magic_shows_prefetch_races(ip):
    cell = """
    def kernel(dest_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

    scatter = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, dest: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, dest: (dest[i], 0))))
    dest = jnp.array([1, 1, 2, 3], dtype=jnp.int32)
    x = jax.ShapeDtypeStruct((32, 128), jnp.float32)
    """
    result, inspection = magic(ip, "scatter(dest, x)", cell)
    assert result.success, result.error_in_exec
    races = overview.payload(inspection)["kernels"][0]["races"]["gpu"]
    assert races["total"] == 1 and races["conflicts"][0]["programs"] == [[0], [1]]


def test_the_magic_runs_calls_on_shapes_with_seeded_inputs(ip):
    body = """
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32),
                         grid=(8,), in_specs=[pl.BlockSpec((128,), lambda i: (i,))] * 2,
                         out_specs=pl.BlockSpec((128,), lambda i: (i,)))
    x = jax.ShapeDtypeStruct((1024,), jnp.float32)
    y = jnp.ones(1024, jnp.float32)
    """
    result, inspection = magic(ip, 'add(x, y) --ref "lambda a, b: a + b"', body)
    assert result.success, result.error_in_exec
    run_result = inspection.result
    first = inspection.args[0].path  # the pallas_call's own name for its first argument
    assert run_result.comparison.ok and run_result.seeded_inputs == (first,)
    # The seeded data is what `inspection.run()` uses for shapes (seed 0).
    (made,) = seeded.example_arrays([S((1024,), jnp.float32)])
    np.testing.assert_allclose(run_result.values[0], np.asarray(made) + 1.0, rtol=1e-6)
    assert run_tab.payload(inspection)["result"]["inputs"] == (
        f"inputs {first}: seeded random, from shapes"
    )
    ip.user_ns["y"] = S((1024,), jnp.float32)
    result, inspection = magic(ip, "add(x, y)", body.replace("y = jnp.ones(1024, jnp.float32)", ""))
    assert result.success, result.error_in_exec
    assert run_tab.payload(inspection)["result"]["inputs"] == "inputs: seeded random, from shapes"
    assert "seeded random, from shapes" in static_tab(inspection, "run")


# ---------------------------------------------------------------------------------
# The corpus' kernels in these styles, through the magic.

STYLES = [corpus.element_halo, corpus.pipelined_add, corpus.tpu_mesh_kernel, corpus.scatter_blocks]


@pytest.mark.parametrize("make", STYLES, ids=lambda m: m.__name__)
def test_corpus_styles_through_the_magic(ip, make):
    case = make()
    ip.user_ns.update(fn=case.fn, args=case.args, reference=case.reference)
    result, inspection = magic(ip, "fn(*args) --ref reference", "")
    assert result.success, result.error_in_exec
    assert inspection.result.comparison.ok
    assert [k.grid for k in inspection.kernels] == [f.grid for f in case.kernels]
    assert inspection.tiles().kernel.name == inspection.kernels[0].name
    lowered = inspection.lower("mosaic-tpu:v5e")
    assert lowered.ok, lowered.error
    assert any(f == inspection.kernels[0].source.file for _, f, _ in lowered.source_map)
