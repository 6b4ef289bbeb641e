"""Performance hints: every rule on a kernel that triggers it and on one that does not.

Oracles: the figures behind each hint computed by hand from block shapes, grids and
the chip tables (`hardware.py`), and the source line each hint must point at.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

import pallaslab
from pallaslab._src import cli
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.hints import sampled_programs
from pallaslab._src.core.lowering.occupancy import occupancy
from pallaslab._src.core.program import program_of
from pallaslab._src.geometry.hints import HintInputs, kernel_hints
from pallaslab._src.records import hardware
from pallaslab._src.records.hints import Hint
from pallaslab._src.records.lowered import GpuResources
from pallaslab._src.views.static_page import static_tab
from pallaslab._src.views.tabs import overview
from tests import corpus
from tests.test_cli import KERNELS

MiB = 1 << 20
F32, BF16 = jnp.float32, jnp.bfloat16
THIS_FILE = str(Path(__file__).resolve())
TRITON = pltriton.CompilerParams(num_warps=4, num_stages=3)

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)


def spec(shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def line_of(marker: str) -> int:
    """The line of this file carrying the comment `# <marker>`."""
    lines = Path(__file__).read_text().splitlines()
    found = [n for n, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}")]
    assert len(found) == 1, (marker, found)
    return found[0]


def hints_of(fn, *args, rule: str | None = None, **options) -> list[Hint]:
    options.setdefault("masks", False)
    found = pallaslab.hints(fn, *args, **options)
    return [h for h in found if rule is None or h.id == rule]


# --- Kernels -------------------------------------------------------------------------


def scale(block, shape, *, dtype=F32, params=None, buffers=None):
    """x * 2, blocked over a 2-D grid."""

    def scale_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    grid = (shape[0] // block[0], shape[1] // block[1])
    return pl.pallas_call(
        scale_kernel,
        out_shape=spec(shape, dtype),
        grid=grid,
        in_specs=[pl.BlockSpec(block, lambda i, j: (i, j))],  # scale-in
        out_specs=pl.BlockSpec(block, lambda i, j: (i, j)),
        compiler_params=params,
    )


def add3(block, shape, *, params=None):
    """x + y, split along the first dimension (one program when the block is whole)."""

    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    rest = (0,) * (len(shape) - 1)
    if block[0] < shape[0]:
        grid, index = (shape[0] // block[0],), lambda i: (i, *rest)  # add3-index
    else:
        grid, index = (), lambda: (0, *rest)
    return pl.pallas_call(
        add_kernel,
        out_shape=spec(shape),
        grid=grid,
        in_specs=[pl.BlockSpec(block, index)] * 2,
        out_specs=pl.BlockSpec(block, index),
        compiler_params=params,
    )


def matmul(bm, bk, bn, m, k, n, *, dtype=F32, params=TRITON, body=None):
    """One dot per program; `body` replaces the kernel's product."""

    def matmul_kernel(x_ref, y_ref, o_ref):
        if body is None:
            o_ref[...] = jnp.dot(x_ref[...], y_ref[...]).astype(o_ref.dtype)  # plain-dot
        else:
            body(x_ref, y_ref, o_ref)

    return pl.pallas_call(
        matmul_kernel,
        out_shape=spec((m, n), F32),
        grid=(m // bm, n // bn),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j: (i, 0)),  # matmul-x
            pl.BlockSpec((bk, bn), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        compiler_params=params,
    ), (spec((m, k), dtype), spec((k, n), dtype))


TPU_PARALLEL = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel"))


def upcast(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...].astype(F32), y_ref[...].astype(F32))  # upcast-dot


def native(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=F32)


def rounded(x_ref, y_ref, o_ref):
    o_ref[...] += jnp.dot(x_ref[...], y_ref[...]).astype(F32)  # bf16-dot


def accumulated(x_ref, y_ref, o_ref):
    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=F32)


# --- TPU tiling ----------------------------------------------------------------------


def test_tpu_tiling_broken_block():
    found = hints_of(
        scale((8, 100), (64, 200), params=TPU_PARALLEL), spec((64, 200)), rule="tpu-tiling"
    )
    # One hint for the input's and the output's BlockSpec: the same advice for both.
    (hint,) = found
    assert hint.subjects == ("x_ref", "o_ref")
    assert hint.severity == "error" and hint.chip == "v5e"
    assert (hint.location.file, hint.location.line) == (THIS_FILE, line_of("scale-in"))
    assert [loc.line for loc in hint.locations] == [line_of("scale-in"), line_of("scale-in") + 1]
    assert hint.figure("x_ref: block") == "(8, 100)" and hint.figure("o_ref: array") == "(64, 200)"
    assert hint.message.count("neither a multiple of 128 nor the array's 200") == 2
    assert hint.message.count("TPU blocks are laid out in (8, 128) tiles") == 1
    clean = scale((8, 128), (64, 256), params=TPU_PARALLEL)
    assert hints_of(clean, spec((64, 256)), rule="tpu-tiling") == []


def test_tpu_padding_of_a_narrow_but_legal_block():
    # (8, 100) of a (64, 100) array is legal (the whole last dimension), but each
    # (8, 128) tile holds 100 lanes: two buffers of 8 x 100 f32 in 8 x 128 tiles.
    found = hints_of(
        scale((8, 100), (64, 100), params=TPU_PARALLEL), spec((64, 100)), rule="tpu-padding"
    )
    (hint,) = found  # the input's and the output's block, one piece of advice
    assert hint.severity == "info" and hint.subjects == ("x_ref", "o_ref")
    assert hint.figure("x_ref: block bytes") == 2 * 8 * 100 * 4
    assert hint.figure("o_ref: bytes in VMEM tiles") == 2 * 8 * 128 * 4
    assert hint.figure("x_ref: padding %") == pytest.approx(round(100 * (1 - 100 / 128), 1))
    # bfloat16 packs 16 rows per tile: 8 rows leave half of each tile empty.
    packed = hints_of(
        scale((8, 128), (64, 128), dtype=BF16, params=TPU_PARALLEL),
        spec((64, 128), BF16),
        rule="tpu-padding",
    )
    assert packed[0].severity == "warning"
    assert packed[0].figure("x_ref: bytes in VMEM tiles") == 2 * 16 * 128 * 2
    assert "16 rows x 128 lanes" in packed[0].message
    for dtype, rows in ((F32, 8), (BF16, 16)):
        full = scale((rows, 128), (64, 128), dtype=dtype, params=TPU_PARALLEL)
        assert hints_of(full, spec((64, 128), dtype), rule="tpu-padding") == []


# --- GPU loads -----------------------------------------------------------------------


def test_gpu_narrow_rows():
    found = hints_of(scale((64, 16), (256, 256), params=TRITON), spec((256, 256)))
    narrow = [h for h in found if h.id == "gpu-narrow-rows"]
    assert [h.severity for h in narrow] == ["info"]  # x_ref and o_ref: one hint
    assert narrow[0].subjects == ("x_ref", "o_ref")
    assert narrow[0].figure("x_ref: contiguous bytes") == 16 * 4
    assert narrow[0].location.line == line_of("scale-in")
    assert "at least 32 elements" in narrow[0].message
    tiny = hints_of(
        scale((64, 4), (256, 256), params=TRITON), spec((256, 256)), rule="gpu-narrow-rows"
    )
    assert tiny[0].severity == "warning" and tiny[0].figure("o_ref: contiguous bytes") == 16
    # 32 f32 = 128 bytes: a full line.
    assert (
        hints_of(
            scale((64, 32), (256, 256), params=TRITON), spec((256, 256)), rule="gpu-narrow-rows"
        )
        == []
    )
    # One row of a 20-wide array: the advice is more rows, not a wider block.
    rows = hints_of(scale((1, 20), (64, 20), params=TRITON), spec((64, 20)), rule="gpu-narrow-rows")
    assert rows[0].figure("x_ref: contiguous bytes") == 80
    assert "blocks of more rows" in rows[0].message


# --- Matrix products -----------------------------------------------------------------


def test_dots_are_read_from_the_jaxpr():
    def body(x_ref, y_ref, o_ref):
        o_ref[...] += jnp.dot(x_ref[...], y_ref[...]).astype(F32)

    fn, args = matmul(32, 64, 16, 64, 64, 32, dtype=BF16, body=body)
    inspection = pallaslab.inspect(fn, *args)
    (dot,) = jax_adapter.kernel_dots(program_of(inspection).sites[0])
    assert (dot.m, dot.n, dot.k, dot.batch) == (32, 16, 64, 1)
    assert (dot.lhs_dtype, dot.out_dtype, dot.widened_to) == ("bfloat16", "bfloat16", "float32")
    assert dot.accumulated and dot.lhs_from == ""


def test_small_dot_on_gpu():
    fn, args = matmul(8, 32, 32, 64, 32, 64)
    (hint,) = hints_of(fn, *args, rule="small-dot")
    assert hint.severity == "warning"
    assert (hint.figure("m"), hint.figure("n"), hint.figure("k")) == (8, 32, 32)
    assert hint.location.line == line_of("plain-dot")
    # 32 rows: mma works, Hopper's wgmma wants multiples of 64 (an A100 has no wgmma).
    fn, args = matmul(32, 32, 32, 64, 32, 64)
    (hopper,) = hints_of(fn, *args, rule="small-dot")
    assert hopper.severity == "info" and hopper.figure("wgmma rows") == 64
    assert hints_of(fn, *args, rule="small-dot", chip="A100") == []
    fn, args = matmul(64, 32, 64, 128, 32, 128)
    assert hints_of(fn, *args, rule="small-dot") == []


def test_small_dot_on_the_mxu():
    params = TPU_PARALLEL
    # K = N = 64 on a 128 x 128 MXU: (64/128) * (64/128) of it per pass.
    fn, args = matmul(128, 64, 64, 256, 64, 256, params=params)
    (hint,) = hints_of(fn, *args, rule="small-dot")
    assert hint.chip == "v5e" and hint.severity == "info"
    assert hint.figure("MXU use %") == 25.0 and hint.figure("MXU size") == 128
    fn, args = matmul(128, 32, 32, 256, 32, 256, params=params)
    (small,) = hints_of(fn, *args, rule="small-dot")
    assert small.severity == "warning" and small.figure("MXU use %") == round(100 / 16, 1)
    fn, args = matmul(128, 128, 128, 256, 128, 256, params=params)
    assert hints_of(fn, *args, rule="small-dot") == []
    # The same dot on a v6e's 256 x 256 MXU fills a quarter of it.
    (wide,) = hints_of(fn, *args, rule="small-dot", chip="v6e")
    assert wide.figure("MXU use %") == 25.0 and wide.figure("MXU size") == 256


def test_bf16_inputs_upcast_before_the_dot():
    fn, args = matmul(64, 64, 64, 128, 64, 128, dtype=BF16, body=upcast)
    (hint,) = hints_of(fn, *args, rule="dot-upcast")
    assert hint.severity == "warning" and hint.location.line == line_of("upcast-dot")
    assert hint.figure("converted from") == "bfloat16"
    # The H100 SXM5's published peaks (Hopper whitepaper), not the table read back.
    assert hint.figure("bf16 tensor-core peak TFLOP/s") == pytest.approx(989.4)
    assert hint.figure("fp32 peak TFLOP/s") == pytest.approx(66.9)
    assert "preferred_element_type=jnp.float32" in hint.message
    fn, args = matmul(64, 64, 64, 128, 64, 128, dtype=BF16, body=native)
    assert hints_of(fn, *args, rule="dot-upcast") == []
    # f32 data is not an upcast: there is nothing narrower to feed the dot.
    fn, args = matmul(64, 64, 64, 128, 64, 128, dtype=F32, body=upcast)
    assert hints_of(fn, *args, rule="dot-upcast") == []


def test_a_bf16_dot_result_that_is_widened_and_summed():
    fn, args = matmul(64, 64, 64, 128, 64, 128, dtype=BF16, body=rounded)
    (hint,) = hints_of(fn, *args, rule="dot-low-precision-result")
    assert hint.location.line == line_of("bf16-dot")
    assert hint.figure("result dtype") == "bfloat16" and hint.figure("k") == 64
    assert "summed" in hint.message
    fn, args = matmul(64, 64, 64, 128, 64, 128, dtype=BF16, body=accumulated)
    assert hints_of(fn, *args, rule="dot-low-precision-result") == []


# --- Filling the chip -----------------------------------------------------------------


def test_a_grid_too_small_for_the_gpu():
    fn = add3((128,), (16 * 128,), params=TRITON)
    (hint,) = hints_of(fn, spec((16 * 128,)), spec((16 * 128,)), rule="small-grid")
    # An H100 SXM5 has 132 SMs (Hopper whitepaper): 16 programs use 12.1% of them.
    assert hint.figure("programs") == 16 and hint.figure("SMs") == 132
    assert hint.figure("SMs used %") == 12.1
    assert hint.severity == "warning"
    big = add3((128,), (2 * 132 * 128,), params=TRITON)
    args = (spec((2 * 132 * 128,)),) * 2
    assert hints_of(big, *args, rule="small-grid") == []


def _inputs(kernel_fn, *args, chip="H100", **resources) -> HintInputs:
    inspection = pallaslab.inspect(kernel_fn, *args)
    kernel = inspection.kernels[0]
    gpu = hardware.gpu(chip)
    registers = resources.get("registers", 32)
    shared = resources.get("shared", 0)
    found = GpuResources(
        arch=gpu.arch,
        num_warps=4,
        num_stages=3,
        registers_per_thread=registers,
        spill_store_bytes=resources.get("spills", 0),
        spill_load_bytes=resources.get("spills", 0),
        local_bytes=0,
        stack_bytes=0,
        shared_bytes=shared,
        occupancy=(
            occupancy(gpu, num_warps=4, registers_per_thread=registers, shared_bytes=shared),
        ),
    )
    return HintInputs(kernel=kernel, chip=gpu, gpu=found)


def test_the_tail_of_a_grid_in_waves():
    # 64 registers x 4 warps: registers allow 8 blocks per SM, warps 16, blocks 32:
    # 132 SMs x 8 = 1056 programs per wave. 1200 programs: 2 waves, the second 144.
    n = 1200 * 128
    inputs = _inputs(add3((128,), (n,), params=TRITON), spec((n,)), spec((n,)), registers=64)
    (hint,) = [h for h in kernel_hints(inputs) if h.id == "grid-tail"]
    assert hint.figure("programs per wave") == 1056
    assert hint.figure("waves") == pytest.approx(1200 / 1056, abs=1e-3)
    assert hint.figure("average fill %") == pytest.approx(round(100 * (1200 / 1056) / 2, 1))
    n = 2 * 1056 * 128  # exactly two full waves
    inputs = _inputs(add3((128,), (n,), params=TRITON), spec((n,)), spec((n,)), registers=64)
    assert [h for h in kernel_hints(inputs) if h.id == "grid-tail"] == []


def test_one_tensor_core_of_two():
    fn = scale((8, 128), (64, 128))
    (hint,) = hints_of(fn, spec((64, 128)), rule="tpu-one-core", chip="v5p")
    assert hint.figure("TensorCores") == 2 and hint.severity == "info"
    parallel = scale((8, 128), (64, 128), params=TPU_PARALLEL)
    assert hints_of(parallel, spec((64, 128)), rule="tpu-one-core", chip="v5p") == []
    assert hints_of(fn, spec((64, 128)), rule="tpu-one-core", chip="v5e") == []  # one core


def test_a_pipeline_of_one_stage():
    shape = (1024, 1024)
    fn = add3(shape, shape)  # one program, whole arrays
    (hint,) = hints_of(fn, spec(shape), spec(shape), rule="one-stage-pipeline", chip="v5e")
    moved = 3 * 1024 * 1024 * 4  # x and y in, the output back
    assert hint.figure("bytes copied") == moved
    # 12 MiB at the v5e's published 819 GBps: 15.4 us.
    assert hint.figure("copy time us") == pytest.approx(12 * 2**20 / 819e9 * 1e6, rel=1e-3)
    assert hint.figure("copy time us") == pytest.approx(15.36, abs=0.01)
    pipelined = add3((128, 1024), shape)
    assert (
        hints_of(pipelined, spec(shape), spec(shape), rule="one-stage-pipeline", chip="v5e") == []
    )


# --- On-chip memory, occupancy, spills -----------------------------------------------


def test_working_set_over_vmem():
    shape, block = (4096, 2048), (2048, 2048)
    fn = add3(block, shape, params=pltpu.CompilerParams(dimension_semantics=("parallel",)))
    args = (spec(shape), spec(shape))
    # Three 16 MiB blocks, two buffers each: 96 MiB, over a v5p's 64 MiB of VMEM.
    (hint,) = hints_of(fn, *args, rule="working-set", chip="v5p")
    assert hint.severity == "error"
    assert hint.figure("working set bytes") == 3 * 2 * 2048 * 2048 * 4
    assert hint.figure("capacity bytes") == 64 * MiB  # a v5p TensorCore's VMEM
    assert hint.location.line == line_of("add3-index")  # where the index map is written
    assert hints_of(fn, *args, rule="working-set", chip="v5e") == []  # 128 MiB
    limited = add3(
        block,
        shape,
        params=pltpu.CompilerParams(dimension_semantics=("parallel",), vmem_limit_bytes=32 * MiB),
    )
    (limit,) = hints_of(limited, *args, rule="working-set", chip="v5e")
    assert limit.figure("capacity bytes") == 32 * MiB


def test_working_set_over_shared_memory():
    from jax.experimental.pallas import mosaic_gpu as plgpu

    # Mosaic GPU pipelines blocks through shared memory: three 256 KiB blocks, one slot
    # each (no sequential grid axis: one step), and a barrier for the inputs' copies.
    mosaic = plgpu.CompilerParams()
    fn, args = matmul(256, 256, 256, 512, 256, 512, params=mosaic)
    assert hints_of(fn, *args, rule="working-set") == []  # Mosaic GPU's own rule says it
    (hint,) = hints_of(fn, *args, rule="mosaic-smem")
    assert hint.severity == "error" and hint.chip == "H100"
    assert hint.figure("SMEM bytes") == 3 * 256 * 256 * 4 + 8
    assert hint.figure("limit bytes") == 227 * 1024  # cc 9.0: 227 KB per block
    fn, args = matmul(64, 64, 64, 512, 64, 512, params=mosaic)
    assert hints_of(fn, *args, rule="mosaic-smem") == []
    # Triton reads blocks from global memory: only a compile's shared memory tells.
    fn, args = matmul(256, 256, 256, 512, 256, 512)
    assert hints_of(fn, *args, rule="working-set") == []


def test_occupancy_limited_by_registers_or_shared_memory():
    fn, args = matmul(64, 64, 64, 512, 64, 512)
    # 255 registers: 8160 per warp, allocated as 8192: 8 warps per SM, 2 blocks of 4.
    (hint,) = [h for h in kernel_hints(_inputs(fn, *args, registers=255)) if h.id == "occupancy"]
    assert hint.figure("blocks per SM") == 2 and hint.figure("active warps") == 8
    assert hint.figure("occupancy %") == 12.5 and "registers" in hint.message
    # 100 KiB of shared memory (+1 KiB reserved) per block: 2 blocks in 228 KiB.
    (smem,) = [
        h for h in kernel_hints(_inputs(fn, *args, shared=100 * 1024)) if h.id == "occupancy"
    ]
    assert smem.figure("occupancy %") == 12.5 and "shared memory" in smem.message
    # 64 registers: 8 blocks of 4 warps, half the SM's warp slots.
    assert [h for h in kernel_hints(_inputs(fn, *args, registers=64)) if h.id == "occupancy"] == []


def test_register_spills():
    fn, args = matmul(64, 64, 64, 512, 64, 512)
    (hint,) = [h for h in kernel_hints(_inputs(fn, *args, spills=96)) if h.id == "register-spills"]
    assert hint.figure("spill store bytes") == 96
    assert [h for h in kernel_hints(_inputs(fn, *args)) if h.id == "register-spills"] == []


@needs_triton
def test_occupancy_from_a_real_ptx_compile():
    # BLOCK_K 64 with 3 stages takes about 97 KiB of shared memory on sm_90.
    args = corpus.seed_matmul(256, 256, 128).args
    inspection = pallaslab.inspect(corpus.make_seed_matmul(64, 64, 64), *args)
    assert [h for h in inspection.hints(masks=False) if h.id == "occupancy"] == []  # not compiled
    found = [h for h in inspection.hints(target="ptx:sm_90", masks=False) if h.id == "occupancy"]
    (hint,) = found
    resources = inspection.lower("ptx:sm_90").resources
    assert hint.figure("shared memory bytes") == resources.shared_bytes
    assert "shared memory" in hint.message
    # Asked for once, the compile's resources are used from then on.
    assert [h.id for h in inspection.hints(masks=False)].count("occupancy") == 1


# --- Lanes and traffic ------------------------------------------------------------------


def masked_rows(cols: int, block: int):
    def kernel(x_ref, o_ref):
        mask = jnp.arange(block) < cols
        row = pltriton.load(x_ref.at[pl.ds(0, block)], mask=mask, other=0.0)  # masked-load
        pltriton.store(o_ref.at[pl.ds(0, block)], row * 2, mask=mask)

    return pl.pallas_call(
        kernel,
        out_shape=spec((16, cols)),
        grid=(16,),
        in_specs=[pl.BlockSpec((None, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None, cols), lambda i: (i, 0)),
    )


def test_masks_that_switch_off_most_lanes():
    found = hints_of(masked_rows(20, 128), spec((16, 20)), rule="masked-lanes", masks=True)
    load = next(h for h in found if "load" in h.message)
    assert load.severity == "warning" and load.location.line == line_of("masked-load")
    assert load.figure("lanes") == 128 and load.figure("programs sampled") == 3
    assert load.figure("lanes on %") == round(100 * 20 / 128, 1)
    assert len(found) == 2  # the store too
    assert load.chip == "H100"  # masked loads: a GPU kernel, though it names no backend
    # 100 of 128 lanes on: no hint.
    assert hints_of(masked_rows(100, 128), spec((16, 100)), rule="masked-lanes", masks=True) == []


def test_sampled_programs_are_first_middle_last():
    assert sampled_programs((16,)) == [(0,), (8,), (15,)]
    assert sampled_programs((4, 4)) == [(0, 0), (2, 0), (3, 3)]
    assert sampled_programs(()) == [()]


def test_hbm_revisits():
    # A (1024, 512) f32 is 2 MiB; in (64, 512) blocks on a (16, 16) grid, every
    # program copies its block: each block 16 times, along grid axis 1.
    fn, args = matmul(64, 512, 64, 1024, 512, 1024)
    found = hints_of(fn, *args, rule="hbm-revisits")
    x = next(h for h in found if h.message.startswith("x_ref"))
    assert x.severity == "warning"
    assert x.figure("bytes moved") == 16 * 1024 * 512 * 4
    assert x.figure("array bytes") == 1024 * 512 * 4
    assert x.figure("times over") == 16.0 and x.figure("repeating grid axes") == "1"
    assert x.location.line == line_of("matmul-x")
    # (512, 512) blocks: read twice, not worth a hint.
    fn, args = matmul(512, 512, 512, 1024, 512, 1024)
    assert hints_of(fn, *args, rule="hbm-revisits") == []


# --- The API, the Kernels tab, the CLI ------------------------------------------------


def test_hints_of_a_function_match_those_of_its_inspection():
    fn, args = matmul(8, 32, 32, 64, 32, 64)
    inspection = pallaslab.inspect(fn, *args)
    assert pallaslab.hints(fn, *args, masks=False) == inspection.hints(masks=False)
    found = inspection.hints(masks=False)
    severities = [h.severity for h in found]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    with pytest.raises(TypeError, match="takes no arguments"):
        pallaslab.hints(inspection, *args)
    with pytest.raises(KeyError, match="no kernel"):
        inspection.hints("nope")
    with pytest.raises(KeyError, match="no figure"):
        found[0].figure("nope")
    assert str(found[0]).startswith(f"{THIS_FILE}:")


def test_the_kernels_tab_lists_hints_with_their_lines():
    fn, args = matmul(8, 32, 32, 64, 32, 64)
    inspection = pallaslab.inspect(fn, *args)
    data = overview.payload(inspection)["kernels"][0]["hints"]
    assert data["masks"] is True  # no masked load or store: nothing left to ask for
    masked = pallaslab.inspect(masked_rows(20, 128), spec((16, 20)))
    assert overview.payload(masked)["kernels"][0]["hints"]["masks"] is False
    small = next(h for h in data["hints"] if h["id"] == "small-dot")
    assert small["location"]["line"] == line_of("plain-dot") and small["chip"] == "H100"
    page = static_tab(inspection, "overview")
    assert "<h5>Hints</h5>" in page and f"line {line_of('plain-dot')}:" in page
    full = overview.respond(inspection, {"kind": "hints", "kernel": 0})
    assert full["masks"] is True and full["hints"]
    assert "error" in overview.respond(inspection, {"kind": "nope"})


def _called(pair):
    fn, args = pair
    return (fn, *args)


def test_every_rule_speaks_plain_words():
    bf16 = (spec((128, 64), BF16), spec((64, 128), BF16))
    big = (spec((4096, 2048)), spec((4096, 2048)))
    found = [
        *hints_of(scale((8, 100), (64, 200), params=TPU_PARALLEL), spec((64, 200))),
        *hints_of(scale((8, 100), (64, 100), params=TPU_PARALLEL), spec((64, 100))),
        *hints_of(scale((64, 4), (256, 256), params=TRITON), spec((256, 256))),
        *hints_of(scale((8, 128), (64, 128)), spec((64, 128)), chip="v5p"),
        *hints_of(*_called(matmul(8, 32, 32, 64, 32, 64))),
        *hints_of(matmul(64, 64, 64, 128, 64, 128, body=upcast)[0], *bf16),
        *hints_of(matmul(64, 64, 64, 128, 64, 128, body=rounded)[0], *bf16),
        *hints_of(*_called(matmul(64, 512, 64, 1024, 512, 1024))),
        *hints_of(add3((1024, 1024), (1024, 1024)), *(spec((1024, 1024)),) * 2, chip="v5e"),
        *hints_of(add3((2048, 2048), (4096, 2048)), *big, chip="v5p"),
        *hints_of(masked_rows(20, 128), spec((16, 20)), masks=True),
    ]
    fn, args = matmul(64, 64, 64, 512, 64, 512)
    found += kernel_hints(_inputs(fn, *args, registers=255, spills=64))
    n = 1200 * 128
    found += kernel_hints(
        _inputs(add3((128,), (n,), params=TRITON), spec((n,)), spec((n,)), registers=64)
    )
    found += _mosaic_gpu_hints()
    from pallaslab._src.geometry.hints import RULES

    ids = {h.id for h in found}
    assert len(ids) == 21 and len(RULES) == 20  # small-grid gives grid-tail as well
    assert "scoped-vmem" in ids
    for hint in found:
        assert "`" not in hint.message and hint.id not in hint.message, hint
        assert hint.chip and hint.location is not None and hint.figures


def _mosaic_gpu_hints() -> list[Hint]:
    """A kernel for each Mosaic GPU rule (`tests/test_mosaic_gpu_hints.py` tests them)."""
    from tests import mosaic_gpu_pipelines as mgpu

    found = []
    for builder, options in (
        (mgpu.tma_wgmma_matmul, {"n": 512, "tile_n": 256, "steps": 6}),  # SMEM
        (mgpu.tma_wgmma_matmul, {"tile_m": 32, "steps": 1, "swizzle": 32}),  # wgmma, pipeline
        (mgpu.persistent_matmul, {"num_sms": 100}),
    ):
        fn, args = builder(**options)
        found += [h for h in hints_of(fn, *args) if h.id.startswith("mosaic")]
    return found


def test_cli_prints_hints_at_their_lines(tmp_path, capsys):
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)  # the CLI tests' vector add: its pallas_call is on line 8
    h100 = ["--chip", "H100", "--no-masks"]
    code = cli.main(["hints", f"{path}:add", "--args", "f32[1024],f32[1024]", *h100])
    out, _ = capsys.readouterr()
    assert code == 0
    first, figures = out.splitlines()[:2]
    assert first.startswith(f"{path}:8: warning: The grid runs 8 programs")
    assert figures == "    add_kernel, assumes H100: programs 8, SMs 132, SMs used % 6.1"
    code = cli.main(["hints", f"{path}:add", "-a", "f32[1024],f32[1024]", "--json", *h100])
    record = json.loads(capsys.readouterr()[0])
    assert code == 0 and record[0]["id"] == "small-grid" and record[0]["chip"] == "H100"
    # Enough programs for an H100: no hints.
    code = cli.main(["hints", f"{path}:add", "-a", "f32[65536],f32[65536]", *h100])
    assert code == 0 and capsys.readouterr()[0] == "no hints (add_kernel)\n"
    code = cli.main(["hints", f"{path}:add", "-a", "f32[1024],f32[1024]", "--chip", "X9"])
    assert code == 2 and "unknown chip 'X9'" in capsys.readouterr()[1]
