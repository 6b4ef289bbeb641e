"""XLA's real compile for a GPU on a machine without one: `xla-gpu:<chip>` targets.

The compile needs JAX's CUDA plugin and NVIDIA's tools (`pallaslab[gpu-compile]`);
without them those tests are skipped and the message that names what to install is
tested instead (by hiding the plugin, as the TPU tests hide libtpu). Compiles are a
few seconds each: every kernel is inspected once per module and its lowerings are
shared through the inspection's cache.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from jax import lax
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src import cli
from pallaslab._src.base import sources
from pallaslab._src.core import gpu_target_config, gpu_toolchain
from pallaslab._src.core.lowering import (
    compare,
    sourcemap,
    toolchains,
    xla_gpu,
    xla_gpu_texts,
    xla_gpu_worker,
)
from pallaslab._src.records import hardware, targets
from pallaslab._src.records.lowered import GpuResources, Lowered, Stage
from pallaslab._src.views.tabs import ir as ir_tab
from tests import corpus

# scripts/test installs pallaslab[gpu-compile] and sets PALLASLAB_GPU_COMPILE=required:
# there a broken install fails these tests instead of skipping them.
needs_gpu_compile = pytest.mark.skipif(
    gpu_toolchain.problem() is not None and os.environ.get("PALLASLAB_GPU_COMPILE") != "required",
    reason=f"needs pallaslab[gpu-compile]: {gpu_toolchain.problem()}",
)
needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)


def S(*shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _line_of(file: str, needle: str) -> int:
    for number, text in enumerate(sources.lines(file), 1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {file}")


def _lines_from(text: str, source_map, file: str, line: int) -> list[str]:
    lines = text.splitlines()
    return [lines[t - 1] for t, f, s in source_map if f == file and s == line]


# ---------------------------------------------------------------------------
# Kernels of our own, one per style: a Mosaic GPU wgmma matmul (plgpu.kernel with
# emit_pipeline), a Mosaic GPU add (pallas_call, JAX's default GPU backend), and a
# Triton-backend matmul (the seed tutorial's).

TILE_M, TILE_N, TILE_K = 128, 128, 64


def mosaic_gpu_matmul(a, b):
    from jax.experimental.pallas import mosaic_gpu as plgpu

    m, k = a.shape
    _, n = b.shape
    swizzle = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))

    def body(a_gmem, b_gmem, o_gmem, o_smem, acc):
        i, j = lax.axis_index("m"), lax.axis_index("n")

        def step(_, a_smem, b_smem):
            plgpu.wgmma(acc, a_smem, b_smem)  # the tensor-core line
            plgpu.wgmma_wait(1)

        plgpu.emit_pipeline(
            step,
            grid=(k // TILE_K,),
            in_specs=[
                plgpu.BlockSpec(
                    (TILE_M, TILE_K), lambda s: (i, s), transforms=swizzle, delay_release=1
                ),
                plgpu.BlockSpec(
                    (TILE_K, TILE_N), lambda s: (s, j), transforms=swizzle, delay_release=1
                ),
            ],
            max_concurrent_steps=2,
        )(a_gmem, b_gmem)
        o_smem[...] = acc[...].astype(o_smem.dtype)
        plgpu.commit_smem()
        tile = o_gmem.at[pl.ds(i * TILE_M, TILE_M), pl.ds(j * TILE_N, TILE_N)]
        plgpu.copy_smem_to_gmem(o_smem, tile)
        plgpu.wait_smem_to_gmem(0)

    return plgpu.kernel(
        body,
        out_type=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=(m // TILE_M, n // TILE_N),
        grid_names=("m", "n"),
        scratch_types=[
            plgpu.SMEM((TILE_M, TILE_N), a.dtype, transforms=swizzle),
            plgpu.ACC((TILE_M, TILE_N), jnp.float32),
        ],
    )(a, b)


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]  # the add line


def blocked_add(x, y):
    return pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 256,),
        in_specs=[pl.BlockSpec((256,), lambda i: (i,))] * 2,
        out_specs=pl.BlockSpec((256,), lambda i: (i,)),
    )(x, y)


def add_then_gelu(x, y):
    # XLA fuses what surrounds the kernel: a program for the optimised-HLO view.
    return jax.nn.gelu(blocked_add(x, y)) * 2.0


@pytest.fixture(scope="module")
def mgpu_matmul():
    half = S(512, 512, dtype=jnp.float16)
    return pallaslab.inspect(mosaic_gpu_matmul, half, half)


@pytest.fixture(scope="module")
def add_program():
    return pallaslab.inspect(add_then_gelu, S(2048), S(2048))


@pytest.fixture(scope="module")
def seed():
    case = corpus.seed_matmul(dtype=jnp.bfloat16)
    return pallaslab.inspect(case.fn, *case.args)


# ---------------------------------------------------------------------------
# The chips' target descriptions (no plugin needed).


@pytest.mark.parametrize("chip", gpu_target_config.CHIPS)
def test_chip_descriptions_carry_the_published_figures(chip):
    config = gpu_target_config.parse(gpu_target_config.description(chip))
    info = config["gpu_device_info"]
    gpu = hardware.gpu(chip)
    assert config["platform_name"] == "CUDA"
    capability = info["cuda_compute_capability"]
    assert (capability["major"], capability.get("minor", 0)) == gpu.compute_capability
    assert info["core_count"] == gpu.sms
    assert info["threads_per_core_limit"] == gpu.max_threads_per_sm
    assert info["registers_per_core_limit"] == gpu.registers_per_sm
    assert info["shared_memory_per_core"] == gpu.shared_memory_per_sm
    assert info["shared_memory_per_block_optin"] == gpu.max_shared_memory_per_block
    assert info["l2_cache_size"] == gpu.l2_bytes
    assert info["device_memory_size"] == gpu.memory_bytes
    assert info["memory_bandwidth"] == pytest.approx(gpu.memory_bandwidth)
    # The clock is the one the FP32 peak implies: SMs x FP32 lanes x 2 (FMA) x clock.
    fp32 = info["core_count"] * info["fpus_per_core"] * 2 * info["clock_rate_ghz"] * 1e9
    assert fp32 == pytest.approx(gpu.fp32_flops, rel=0.01)
    assert info["threads_per_warp"] == 32 and info["threads_per_block_limit"] == 1024
    # The kind a real device reports: Pallas' GPU tables key on it.
    assert gpu_target_config.device_kind(chip).startswith(f"NVIDIA {chip}")
    assert "source" in gpu_target_config.description(chip).lower()


def test_text_proto_reader():
    parsed = gpu_target_config.parse(
        '# comment\na { b: ENUM c: "x y" }\na { b: 2 }\nf: 1.5 g: -3 h: true\n'
    )
    assert parsed == {"a": [{"b": "ENUM", "c": "x y"}, {"b": 2}], "f": 1.5, "g": -3, "h": True}
    with pytest.raises(ValueError, match="ends inside"):
        gpu_target_config.parse("a { b: 1")
    with pytest.raises(KeyError, match="known: A100"):
        gpu_target_config.description("V100")


def test_xla_gpu_targets_and_their_names():
    names = pallaslab.targets()
    for chip in ("A100", "H100", "H200", "B200"):
        assert f"xla-gpu:{chip}" in names
    assert targets.parse_target("xla-gpu").name == "xla-gpu:H100"
    assert targets.parse_target("XLA-GPU:h200").name == "xla-gpu:H200"
    assert targets.parse_target("xla-gpu:sm80").name == "xla-gpu:A100"
    assert targets.parse_target("xla-gpu:sm_100a").name == "xla-gpu:B200"
    target = targets.parse_target("xla-gpu:B200")
    assert (target.kind, target.arch, target.language, target.group) == (
        "xla-gpu",
        "B200",
        "sass",
        "GPU · XLA's own compile",
    )
    with pytest.raises(ValueError, match="Did you mean xla-gpu:H100"):
        targets.parse_target("xla-gpu:H10")


# ---------------------------------------------------------------------------
# Without the plugin (or with the wrong one): one message naming what to install.


def _hide_plugins(monkeypatch):
    find_spec = importlib.util.find_spec
    hidden = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_plugins.xla_cuda")

    def without(name, *args, **kwargs):
        if name.startswith(hidden):
            return None
        return find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without)


def test_without_the_plugin_one_clear_message(monkeypatch, add_program):
    _hide_plugins(monkeypatch)
    jaxlib = gpu_toolchain.toolchain().jaxlib_version
    message = toolchains.unavailable_reason(targets.parse_target("xla-gpu:H100"))
    assert message is not None
    assert f"'jax-cuda12-plugin=={jaxlib}' 'jax-cuda12-pjrt=={jaxlib}'" in message
    assert "pip install 'pallaslab[gpu-compile]'" in message
    # A fresh program: nothing cached. The record says it; nothing is raised.
    inspection = pallaslab.inspect(add_then_gelu, S(1024), S(1024))
    lowered = inspection.lower("xla-gpu:A100")
    assert not lowered.ok and lowered.error.kind == "unavailable"
    assert lowered.error.message == message
    assert "A100" in lowered.header
    # The IR tab lists the target as not installed, with the same message.
    listed = {t["name"]: t for t in ir_tab.payload(inspection)["targets"]}
    assert listed["xla-gpu:H100"]["unavailable"] == message


def test_a_plugin_of_another_release_is_named(monkeypatch):
    real = gpu_toolchain._version

    def versions(distribution):
        return "0.0.1" if distribution.startswith("jax-cuda") else real(distribution)

    toolchain = gpu_toolchain.toolchain()
    if toolchain.plugin is None:
        pytest.skip("the plugin is not installed: nothing to mismatch")
    monkeypatch.setattr(gpu_toolchain, "_version", versions)
    gpu_toolchain._versions.cache_clear()
    try:
        message = gpu_toolchain.problem()
    finally:
        gpu_toolchain._versions.cache_clear()
    jaxlib = toolchain.jaxlib_version
    assert message is not None and f"jaxlib's version {jaxlib}" in message
    assert "0.0.1" in message and f"'{toolchain.plugin.distribution}=={jaxlib}'" in message


def test_a_missing_tool_is_named(monkeypatch):
    found = gpu_toolchain.find_tools(gpu_toolchain.DEFAULT_PLUGIN)
    monkeypatch.setattr(gpu_toolchain, "find_tools", lambda family: ("", "", found[2], found[3]))
    message = gpu_toolchain.problem()
    assert message is not None and "ptxas" in message and "nvdisasm" in message
    assert "nvidia-cuda-nvcc" in message and "nvidia-cuda-nvdisasm" in message


# ---------------------------------------------------------------------------
# Reading what the compiler writes (no plugin needed).


def test_ptxas_reports_launches_and_ptx_facts():
    report = textwrap.dedent(
        """\
        ptxas info    : 0 bytes gmem
        ptxas info    : Compiling entry function 'k_mosaic_gpu_kernel' for 'sm_90a'
        ptxas info    : Function properties for k_mosaic_gpu_kernel
            0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
        ptxas info    : Used 168 registers, used 16 barriers, 1 bytes smem, 16 bytes lmem
        """
    )
    assert xla_gpu_texts.ptxas_report(report) == {
        "k_mosaic_gpu_kernel": {
            "stack": 0,
            "spill_stores": 8,
            "spill_loads": 4,
            "registers": 168,
            "local": 16,
        }
    }
    assert xla_gpu_texts.static_shared(report) == 1
    thunks = (
        "001: kKernel [source] loop_gelu_fusion grid: [2, 1, 1] threads: [1024, 1, 1]  "
        "shared_memory: 0 bytes\n"
        "002: kCustomKernel [sink] _matmul_kernel grid: [8, 8, 1] threads: [256, 1, 1]  "
        "shared_memory: 32768 bytes\n"
    )
    kernel = xla_gpu_texts.launches(thunks)[1]
    assert (kernel.kind, kernel.name, kernel.grid, kernel.threads, kernel.shared_bytes) == (
        "kCustomKernel",
        "_matmul_kernel",
        (8, 8, 1),
        (256, 1, 1),
        32768,
    )
    assert xla_gpu_texts.threads_per_block(".visible .entry k(\n)\n.maxntid 128, 1, 1\n{") == 128
    passes = (("00 original", "gpu.launch ... dynamic_shared_memory_size %c3080_i32 {"),)
    assert xla_gpu_texts.mosaic_dynamic_shared(passes) == 3080


def test_one_function_out_of_a_module():
    ptx = textwrap.dedent(
        """\
        .version 8.8
        .target sm_90a
        .address_size 64
        .extern .shared .align 16 .b8 global_smem[];
        .visible .entry fusion(
        )
        {
        \tret;
        }
        .visible .entry kernel(
        )
        {
        \tadd.f32 %r1, %r2, %r3;
        }
        """
    )
    one = xla_gpu_texts.ptx_function(ptx, "kernel")
    assert "add.f32" in one and "fusion" not in one and ".target sm_90a" in one
    assert "global_smem" in one
    assert xla_gpu_texts.ptx_function(ptx, "nope") == ptx
    sass = textwrap.dedent(
        """\
        \t.headerflags @"EF_CUDA_SM90"
        //--------------------- .text.fusion       --------------------------
        \t.section .text.fusion
                /*0000*/                   EXIT ;
        //--------------------- .text.kernel       --------------------------
        \t.section .text.kernel
                /*0000*/                   FADD R1, R2, R3 ;
        //--------------------- .nv.shared.kernel --------------------------
        """
    )
    one = xla_gpu_texts.sass_function(sass, "kernel")
    assert "FADD" in one and "EXIT" not in one and ".nv.shared" not in one


def test_mosaic_pass_dumps_become_named_stages():
    log = "\n".join(
        [
            "// -----// IR Dump Before PassA: pass-a ('builtin.module' operation: @k) //----- //",
            "module @k { A }",
            "// -----// IR Dump Before PassB: pass-b ('builtin.module' operation: @k) //----- //",
            "module @k { A }",
            "// -----// IR Dump Before PassC: pass-c ('builtin.module' operation: @k) //----- //",
            "module @k { B }",
        ]
    )
    # The first dump is the original; pass-a changed nothing, so it adds no stage.
    assert xla_gpu_worker._passes(log) == [
        ["00 original", "module @k { A }"],
        ["02 after pass-b", "module @k { B }"],
    ]


def test_hlo_stack_frames_and_sass_labels_map_to_source():
    hlo = textwrap.dedent(
        """\
        HloModule jit_f

        FileNames
        1 "/src/k.py"

        FunctionNames
        1 "f"

        FileLocations
        1 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=2 end_column=9}

        StackFrames
        1 {file_location_id=1 parent_frame_id=1}

        ENTRY %main {
          %p = f32[8]{0} parameter(0)
          ROOT %t = f32[8]{0} tanh(%p), metadata={op_name="tanh" stack_frame_id=1}
        }
        """
    )
    _, source_map = sourcemap.hlo_text(hlo)
    assert source_map == ((17, "/src/k.py", 12),)
    # nvdisasm marks a line once; a branch target inside its run does not end it.
    sass = '\t//## File "/src/k.py", line 7\n  /*0010*/ FADD R1 ;\n.L_x_3:\n  /*0020*/ FMUL R2 ;\n'
    _, source_map = sourcemap.sass_text(sass)
    assert source_map == ((1, "/src/k.py", 7), (3, "/src/k.py", 7))


def _lowered(target, text, language, registers, shared, stages=()):
    resources = GpuResources("sm_90", 4, 3, registers, 0, 0, 0, 0, shared)
    return Lowered(target, "k", 0, language, "", text, resources=resources, stages=stages)


def test_two_compilers_compared_figure_by_figure():
    pip = _lowered(
        "sass:sm_90",
        "/*0000*/ HGMMA.64x128x16 R0 ;\n/*0010*/ LDS R1 ;\n/*0020*/ NOP ;\n/*0030*/ EXIT ;",
        "sass",
        154,
        48 * 1024,
    )
    xla_sass = "\n".join(
        ["/*0000*/ HGMMA.64x128x16 R0 ;"] * 2 + ["/*0010*/ @P0 LDS R1 ;"] * 3 + ["/*0030*/ EXIT ;"]
    )
    xla = _lowered(
        "xla-gpu:H100",
        xla_sass,
        "sass",
        168,
        48 * 1024,
        stages=(Stage("ptx", "", "ptx"),),
    )
    result = compare.compare_lowered(pip, xla)
    rows = {name: (a, b) for name, a, b in result.rows}
    assert rows["registers per thread"] == ("154", "168")
    assert rows["SASS instructions"] == ("3", "6")  # NOPs do not count
    assert result.differences[0] == ("LDS", 1, 3)
    assert "registers per thread 154 vs 168 (+14)" in result.summary
    assert "SASS instructions 3 vs 6 (+3)" in result.summary
    assert compare.ptx_counts("{\n\tld.global.b32 %r1, [%rd1];\n\t@%p1 bra $L;\n\tret;\n}") == {
        "ld": 1,
        "bra": 1,
        "ret": 1,
    }


# ---------------------------------------------------------------------------
# The real compile (pallaslab[gpu-compile]).


@needs_gpu_compile
def test_mosaic_gpu_matmul_for_h100_has_wgmma_linked_to_its_line(mgpu_matmul):
    lowered = mgpu_matmul.lower("xla-gpu:H100")
    assert lowered.ok, lowered.error
    assert lowered.language == "sass" and "H100" in lowered.header and "XLA" in lowered.header
    file = __file__
    wgmma_line = _line_of(file, "plgpu.wgmma(acc, a_smem, b_smem)")
    sass_at_line = _lines_from(lowered.text, lowered.source_map, file, wgmma_line)
    assert any("HGMMA" in t for t in sass_at_line)
    assert "//## File" not in lowered.text
    ptx = lowered.stage("ptx")
    assert ".target sm_90a" in ptx.text
    ptx_at_line = _lines_from(ptx.text, ptx.source_map, file, wgmma_line)
    assert any("wgmma.mma_async" in t for t in ptx_at_line)
    # ptxas' own report: the registers the resources say.
    report = lowered.stage("ptxas").text
    registers = int(re.search(r"Used (\d+) registers", report).group(1))
    resources = lowered.resources
    assert resources.registers_per_thread == registers and 32 < registers <= 255
    assert resources.spill_store_bytes == 0 and resources.num_warps == 4
    # Two 128x64 and 64x128 f16 stages per operand plus the 128x128 output tile.
    assert resources.shared_bytes >= 2 * 2 * (128 * 64 * 2) + 128 * 128 * 2
    (h100,) = resources.occupancy
    assert h100.gpu == "H100" and h100.same_arch and h100.blocks_per_sm >= 1


@needs_gpu_compile
def test_mosaic_gpu_pass_pipeline_is_staged_and_linked(mgpu_matmul):
    lowered = mgpu_matmul.lower("xla-gpu:H100")
    pipeline = [s for s in lowered.stages if s.name.startswith("Mosaic GPU")]
    assert pipeline[0].name == "Mosaic GPU 00 original" and len(pipeline) > 10
    # The first stage is the module as Pallas built it: Mosaic GPU's own dialect.
    assert "mosaic_gpu." in pipeline[0].text
    assert any("llvm." in s.text for s in pipeline[-3:])
    wgmma_line = _line_of(__file__, "plgpu.wgmma(acc, a_smem, b_smem)")
    assert any(f == __file__ and s == wgmma_line for _, f, s in pipeline[0].source_map)
    assert lowered.stage("Mosaic GPU 00").name == "Mosaic GPU 00 original"


@needs_gpu_compile
def test_triton_matmul_for_a100_uses_mma_sync(seed):
    lowered = seed.lower("xla-gpu:A100")
    assert lowered.ok, lowered.error
    assert "HMMA" in lowered.text and "HGMMA" not in lowered.text
    ptx = lowered.stage("ptx").text
    assert ".target sm_80" in ptx and "mma.sync" in ptx and "wgmma" not in ptx
    resources = lowered.resources
    assert resources.arch == "sm_80" and resources.num_warps == 4
    assert 0 < resources.registers_per_thread <= 255
    # num_stages=3 of a 64x32 and a 32x64 bf16 tile: XLA's Triton keeps two or three
    # of them in shared memory (it pipelines one load less than the triton package).
    tiles = (64 * 32 + 32 * 64) * 2
    assert 2 * tiles <= resources.shared_bytes <= 3 * tiles
    assert any("strips source locations" in note for note in lowered.notes)
    # The SASS is that of the cubin XLA's own ptxas run made (kept, not rebuilt).
    assert not any("cubin was not kept" in note for note in lowered.notes)


@needs_gpu_compile
def test_the_ir_tab_explains_each_stage_and_why_nothing_is_linked(mgpu_matmul, seed):
    mosaic = mgpu_matmul.lower("xla-gpu:H100")
    summary = ir_tab.summary(mgpu_matmul, mosaic, {"stage": ""})
    assert summary["finalTitle"].startswith("The SASS XLA compiled for the H100")
    titles = dict(zip(summary["stages"], summary["stageTitles"], strict=True))
    assert titles["Mosaic GPU 00 original"].startswith("Mosaic GPU's module as Pallas emitted")
    assert titles["ptxas"].startswith("ptxas' report")
    assert not [n for n, t in titles.items() if t.startswith("An intermediate text")], titles
    assert summary["mapped"] > 0 and summary["unlinked"] == ""
    # XLA strips a Triton kernel's locations: the pane the source would be in says so
    # (the triton package's targets are linked), instead of staying blank.
    triton = seed.lower("xla-gpu:A100")
    unlinked = ir_tab.summary(seed, triton, {"stage": ""})
    assert unlinked["mapped"] == 0 and "strips source locations" in unlinked["unlinked"]
    report = ir_tab.summary(seed, triton, {"stage": "ptxas"})
    assert report["unlinked"].startswith("The compiler kept no source locations in the stage")


@needs_gpu_compile
def test_mosaic_gpu_add_for_b200(add_program):
    lowered = add_program.lower("xla-gpu:B200")
    assert lowered.ok, lowered.error
    ptx = lowered.stage("ptx")
    assert ".target sm_100a" in ptx.text and "sm_100a" in lowered.stage("ptxas").text
    assert "B200" in lowered.header
    add_line = _line_of(__file__, "o_ref[...] = x_ref[...] + y_ref[...]")
    assert any("add" in t for t in _lines_from(ptx.text, ptx.source_map, __file__, add_line))
    sass_at_line = _lines_from(lowered.text, lowered.source_map, __file__, add_line)
    assert any("FADD" in t for t in sass_at_line)
    assert lowered.resources.registers_per_thread > 0


@needs_gpu_compile
def test_the_program_around_the_kernel(add_program):
    lowered = add_program.lower("xla-gpu:H100")
    assert lowered.ok, lowered.error
    program = lowered.stage("hlo (program)")
    # XLA fused gelu and the scaling around the kernel's custom call.
    assert "mosaic_gpu_v2" in program.text and "fusion" in program.text
    assert "more characters elided" in program.text  # the kernel's bytecode
    gelu_line = _line_of(__file__, "return jax.nn.gelu(blocked_add(x, y)) * 2.0")
    assert any(f == __file__ and s == gelu_line for _, f, s in program.source_map)
    launches = lowered.stage("launches (program)").text
    assert "fusion" in launches
    assert any("Compile-only" in note for note in lowered.notes)
    # A program of one kernel compiles once: its compile is the kernel's.
    assert "hlo (kernel alone)" not in [s.name for s in lowered.stages]


@needs_gpu_compile
def test_cached_and_stage_by_language(add_program):
    first = add_program.lower("xla-gpu:H100")
    assert add_program.lower("xla-gpu:h100") is first
    sass = first.stage("sass")
    assert sass.text == first.text and sass.source_map == first.source_map


@needs_gpu_compile
@needs_triton
def test_two_compilers_side_by_side(seed):
    xla = seed.lower("xla-gpu:A100")
    pip = seed.lower("sass:sm_80")
    assert xla.ok and pip.ok
    result = pallaslab.compare_lowered(pip, xla)
    rows = {name: (a, b) for name, a, b in result.rows}
    assert rows["registers per thread"] == (
        str(pip.resources.registers_per_thread),
        str(xla.resources.registers_per_thread),
    )
    assert "SASS instructions" in rows and result.summary.startswith("sass:sm_80 vs xla-gpu:A100")
    # The IR tab says it in one line, for either of the two.
    summary = ir_tab.summary(seed, xla, {"target": "xla-gpu:A100"})
    assert any(
        note.startswith("Two compilers: sass:sm_80 vs xla-gpu:A100") for note in summary["notes"]
    )


@needs_gpu_compile
def test_cli_prints_sass_and_stages(tmp_path, capsys):
    path = tmp_path / "kernels.py"
    path.write_text(
        textwrap.dedent(
            """\
            import jax
            from jax.experimental import pallas as pl

            def add_kernel(x_ref, y_ref, o_ref):
                o_ref[...] = x_ref[...] + y_ref[...]

            def add(x, y):
                return pl.pallas_call(
                    add_kernel,
                    out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                    grid=(x.shape[0] // 256,),
                    in_specs=[pl.BlockSpec((256,), lambda i: (i,))] * 2,
                    out_specs=pl.BlockSpec((256,), lambda i: (i,)),
                )(x, y)
            """
        )
    )
    spec = f"{path}:add"
    args = ["--args", "f32[1024],f32[1024]"]
    code = cli.main(["lower", spec, "--target", "xla-gpu:H100", "--stage", "sass", "--map", *args])
    out, _ = capsys.readouterr()
    assert code == 0 and "FADD" in out and "kernels.py:5 |" in out
    assert cli.main(["lower", spec, "-t", "xla-gpu:H100", "--stage", "list", *args]) == 0
    out, _ = capsys.readouterr()
    assert "ptx" in out.splitlines() and "Mosaic GPU 00 original" in out
    assert cli.main(["lower", spec, "-t", "xla-gpu:H100", "--resources", *args]) == 0
    out, _ = capsys.readouterr()
    assert "registers per thread:" in out and "occupancy on H100" in out
    assert cli.main(["lower", spec, "-t", "xla-gpu:H100", "--json", *args]) == 0
    record = json.loads(capsys.readouterr()[0])
    assert record["target"] == "xla-gpu:H100" and record["error"] is None


@needs_gpu_compile
def test_the_plugin_stays_quiet_on_cpu():
    # JAX_PLATFORMS=cpu (tests, notebooks): the plugin is found but CUDA is never
    # initialised, and nothing is printed.
    done = subprocess.run(
        [sys.executable, "-c", "import jax, pallaslab; print(jax.devices())"],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=False,
        timeout=120,
    )
    assert done.returncode == 0 and "CpuDevice" in done.stdout
    assert done.stderr.strip() == ""


def too_big_for_shared_memory(x, y):
    block = pl.BlockSpec((65536,), lambda i: (i,))  # 3 x 256 KiB: more than an SM has
    return pl.pallas_call(
        add_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 65536,),
        in_specs=[block, block],
        out_specs=block,
    )(x, y)


@needs_gpu_compile
def test_a_kernel_mosaic_gpu_cannot_take_says_why_it_went_to_triton():
    inspection = pallaslab.inspect(too_big_for_shared_memory, S(262144), S(262144))
    lowered = inspection.lower("xla-gpu:H100")
    assert lowered.ok, lowered.error
    (note,) = [n for n in lowered.notes if "default GPU backend" in n]
    assert "exceeds available shared memory" in note and "Triton backend" in note
    # The Triton build keeps its blocks in registers: it spills, and ptxas says so.
    report = lowered.stage("ptxas").text
    spills = int(re.search(r"(\d+) bytes spill stores", report).group(1))
    assert lowered.resources.spill_store_bytes == spills > 0


@needs_gpu_compile
def test_a_waiting_worker_whose_parent_went_away_removes_its_folder():
    # A parent killed outright runs no clean-up: its waiting worker sees stdin close
    # and must remove the folder made for it (the oracle: the folder is gone).
    worker = xla_gpu._spawn(gpu_toolchain.toolchain(), on_device=False)
    root = worker.root
    assert (root / "cuda" / "bin" / "ptxas").exists()
    worker.process.communicate("", timeout=300)  # stdin closed, no request sent
    assert worker.process.returncode == 0
    assert not root.exists()
    worker.discard()  # the parent's own clean-up finds nothing left, and says nothing
