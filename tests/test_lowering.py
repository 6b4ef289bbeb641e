"""The IR explorer's core: targets, source maps, resources, and real lowered content.

Compiles are slow on a small CPU machine, so each kernel is inspected once per module
and its lowerings are shared between tests through the inspection's cache.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.gpu import attention as gpu_attention
from jax.experimental.pallas.ops.gpu import decode_attention as gpu_decode_attention
from jax.experimental.pallas.ops.gpu import layer_norm as gpu_layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as gpu_rms_norm
from jax.experimental.pallas.ops.gpu import softmax as gpu_softmax
from jax.experimental.pallas.ops.tpu import flash_attention as tpu_flash_attention
from jax.experimental.pallas.ops.tpu import matmul as tpu_matmul

import pallaslab
from pallaslab._src.base import sources
from pallaslab._src.core import jax_adapter
from pallaslab._src.core.lowering import occupancy, sourcemap, tpu_compile, tpu_rules
from pallaslab._src.core.program import program_of
from pallaslab._src.records import hardware, targets
from pallaslab._src.views import stagenames
from tests import corpus

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)
needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None, reason="needs libtpu (pallaslab[tpu])"
)


def S(*shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _line_of(file: str, needle: str, after: int = 0) -> int:
    for number, text in enumerate(sources.lines(file), 1):
        if number > after and needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {file}")


def _texts_at(lowered, file, line):
    return [lowered.lines[n - 1] for n in lowered.lines_of(file, line)]


# ---------------------------------------------------------------------------
# Targets.


def test_targets_list_every_family():
    names = pallaslab.targets()
    for name in (
        "stablehlo",
        "stablehlo:cuda",
        "stablehlo:tpu",
        "mosaic-gpu",
        "triton",
        "ttgir:sm_80",
        "llir:sm_90",
        "ptx:sm_90",
        "sass:sm_120",
        "mosaic-tpu:v5e",
        "mosaic-tpu:7x",
        "tpu-compile:v6e",
    ):
        assert name in names, name
    assert len(names) == len(set(names))


def test_target_names_and_aliases():
    assert targets.parse_target("ptx").name == "ptx:sm_90"
    assert targets.parse_target("PTX:SM80").name == "ptx:sm_80"
    assert targets.parse_target("mosaic-tpu").name == "mosaic-tpu:v5e"
    assert targets.parse_target("tpu-compile:v5litepod").name == "tpu-compile:v5e"
    assert targets.parse_target("ttir").name == "triton"
    with pytest.raises(ValueError, match="Did you mean ptx:sm_90"):
        targets.parse_target("ptx:sm_9O")


# ---------------------------------------------------------------------------
# Source maps out of compiler texts (no compiler needed).

MLIR = """#loc = loc(unknown)
module @k {
  tt.func public @k(%arg0: !tt.ptr<f32> loc(unknown)) {
    %0 = tt.get_program_id x : i32 loc(#loc)
    %1 = arith.addf %a, %b : tensor<8xf32> loc(#loc5)
    %2 = arith.mulf %a, %b : tensor<8xf32> loc(#loc6)
    %3 = "tt.foo"() {note = "loc(#loc5) stays"} : () -> i32 loc(#loc7)
    tt.return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc("/src/k.py":12:8 to :20)
#loc2 = loc("/src/helper.py":3:4)
#loc3 = loc("kernel"(#loc1))
#loc4 = loc("add"(#loc3))
#loc5 = loc("add:"(#loc4))
#loc6 = loc(callsite(#loc2 at #loc1))
#loc7 = loc(fused["x", #loc2])
"""


def test_mlir_locations_resolve_through_names_callsites_and_fusions():
    text, source_map = sourcemap.mlir_text(MLIR)
    lines = text.splitlines()
    assert not any(line.startswith("#loc") for line in lines)
    assert "loc(unknown)" not in text and "loc(#loc)" not in text
    mapped = {lines[n - 1].strip(): (f, s) for n, f, s in source_map}
    assert mapped["%1 = arith.addf %a, %b : tensor<8xf32>"] == ("/src/k.py", 12)
    # A call site maps to the callee's line (the helper that does the work).
    assert mapped["%2 = arith.mulf %a, %b : tensor<8xf32>"] == ("/src/helper.py", 3)
    # A location spelled inside a string attribute is text, not a location.
    assert '"loc(#loc5) stays"' in text
    assert all(1 <= n <= len(lines) for n, _, _ in source_map)


def test_ptx_locations():
    ptx = "\n".join(
        [
            ".version 8.4",
            '\t.file\t1 "<unknown>"',
            ".visible .entry k(",
            ")",
            "{",
            "\t.loc\t1 12 8",
            "\tld.global.b32 \t%r1, [%rd1];",
            "\tadd.f32 \t%r3, %r1, %r2;",
            "\t.loc\t1 14 2",
            "\tst.global.b32 \t[%rd2], %r3;",
            "\tret;",
            "}",
            "\t.section\t.debug_abbrev",
            "\t{",
            ".b8 1",
            "\t}",
            "\t.section\t.debug_macinfo\t{\t}",
        ]
    )
    text, source_map = sourcemap.ptx_text(ptx, default_file="/src/k.py")
    lines = text.splitlines()
    assert ".loc" not in text and ".debug_" not in text and ".b8" not in text
    mapped = {lines[n - 1].strip(): s for n, f, s in source_map if f == "/src/k.py"}
    assert mapped["add.f32 \t%r3, %r1, %r2;"] == 12
    assert mapped["st.global.b32 \t[%rd2], %r3;"] == 14


def test_sass_llvm_and_bundle_locations():
    sass = '\t//## File "/src/k.py", line 7\n        /*0010*/  FADD R1, R2, R3 ;\n'
    text, source_map = sourcemap.sass_text(sass)
    assert "//##" not in text and source_map == ((1, "/src/k.py", 7),)

    llvm = "\n".join(
        [
            "define void @k() !dbg !4 {",
            "  %1 = fadd float %a, %b, !dbg !9",
            "  ret void",
            "}",
            '!1 = !DIFile(filename: "k.py", directory: "/src")',
            '!4 = distinct !DISubprogram(name: "k", scope: !1, file: !1)',
            "!9 = !DILocation(line: 21, column: 3, scope: !4)",
        ]
    )
    text, source_map = sourcemap.llvm_text(llvm)
    assert "!dbg" not in text and "DILocation" not in text
    assert source_map == ((2, "/src/k.py", 21),)
    assert text.splitlines()[1] == "  %1 = fadd float %a, %b"

    bundle = (
        '  0x10 LB: > { %1 = vadd.f32 %v1, %v2 /* loc("/src/k.py":5:2 to :9) */  ;;  '
        '%2 = vld [vmem:[%s1]] /* loc("/src/k.py":4:1) */ ;;  %3 = vmul.f32 %v1, %v1 '
        '/* loc("/src/k.py":5:4) */ }'
    )
    text, source_map = sourcemap.commented_locations_text(bundle)
    assert "loc(" not in text and "vadd.f32" in text
    # One bundle, instructions from two source lines: both are linked.
    assert source_map == ((1, "/src/k.py", 5), (1, "/src/k.py", 4))


def test_long_strings_are_elided():
    text = 'ir = "' + "x" * 5000 + '", name = "k"'
    short = sourcemap.elide_long_strings(text)
    assert len(short) < 200 and 'name = "k"' in short and "more characters elided" in short


# ---------------------------------------------------------------------------
# Occupancy and the TPU rules (pure).


def test_occupancy_follows_the_cuda_rules():
    h100 = hardware.gpu("H100")
    # 80 registers x 32 threads = 2560 per warp: 25 warps fit, so 6 blocks of 4 warps.
    by_registers = occupancy.occupancy(
        h100, num_warps=4, registers_per_thread=80, shared_bytes=25 * 1024
    )
    assert (by_registers.blocks_per_sm, by_registers.limiter) == (6, "registers")
    assert by_registers.fraction == pytest.approx(24 / 64)
    # 100 KiB (+1 KiB reserved) of shared memory per block: two blocks in 228 KiB.
    by_shared = occupancy.occupancy(
        h100, num_warps=4, registers_per_thread=32, shared_bytes=100 * 1024
    )
    assert (by_shared.blocks_per_sm, by_shared.limiter) == (2, "shared memory")
    too_big = occupancy.occupancy(
        hardware.gpu("L4"), num_warps=4, registers_per_thread=32, shared_bytes=120 * 1024
    )
    assert too_big.blocks_per_sm == 0 and too_big.active_warps == 0
    by_warps = occupancy.occupancy(h100, num_warps=8, registers_per_thread=32, shared_bytes=0)
    assert (by_warps.blocks_per_sm, by_warps.limiter) == (8, "warps")


def _kernel_of(fn, *args):
    return pallaslab.inspect(fn, *args).kernels[0]


def test_tiling_rule_and_vmem_from_records():
    case = corpus.row_softmax()
    (problem, _) = tpu_rules.tiling_problems(_kernel_of(case.fn, *case.args))
    assert problem.operand == "x_ref" and "squeezed" in problem.message
    assert "multiples of 8 and 128" in problem.hint

    case = corpus.kacc_matmul()
    kernel = _kernel_of(case.fn, *case.args)
    assert tpu_rules.tiling_problems(kernel) == []
    blocks = tpu_rules.vmem_blocks(kernel)
    # Three 128x128 f32 blocks, each double-buffered.
    assert [b.padded_bytes for b in blocks] == [2 * 128 * 128 * 4] * 3

    assert tpu_rules.padded_bytes((8, 100), "float32") == 8 * 128 * 4
    assert tpu_rules.padded_bytes((8, 128), "bfloat16") == 16 * 128 * 2  # 16-row tiles


def test_bundle_counts_and_utilization():
    bundles = "\n".join(
        [
            "     0   :  { %1 = smov.u32 0 }",
            "   0x1 LB: > { %2 = vadd.f32 %v1, %v2 }",
            "   0x2   : > { %3 = vld [vmem:[%s1]] }",
            "   0x3   :  { %4 = vsyncpa [#allocation5], 1 }",
        ]
    )
    assert tpu_compile.bundle_counts(bundles) == (4, 2)
    per_bundle = "== CAPACTIY:\nMATMUL, VALU\n    4     4\n== UTILIZATION:\n1 2\n3 0\n"
    assert tpu_compile.utilization(per_bundle) == (("MATMUL", 4, 2.0), ("VALU", 4, 1.0))


# ---------------------------------------------------------------------------
# The seed matmul (bf16, Triton backend): TTIR down to SASS.


@pytest.fixture(scope="module")
def seed():
    case = corpus.seed_matmul(dtype=jnp.bfloat16)
    return pallaslab.inspect(case.fn, *case.args)


def _dot_line(kernel):
    return _line_of(kernel.source.file, "pltriton.dot(", kernel.source.line)


def test_triton_ir_links_the_dot(seed):
    kernel = seed.kernels[0]
    lowered = seed.lower("triton")
    assert lowered.ok and lowered.language == "mlir"
    assert "jax " + jax.__version__ in lowered.header and "num_warps=4" in lowered.header
    assert "#loc" not in lowered.text
    assert any("tt.dot" in t for t in _texts_at(lowered, kernel.source.file, _dot_line(kernel)))


@needs_triton
def test_ptx_sm90_uses_wgmma_and_sm80_mma_sync(seed):
    kernel = seed.kernels[0]
    hopper = seed.lower("ptx:sm_90")
    assert hopper.ok, hopper.error
    assert "wgmma.mma_async" in hopper.text
    assert "triton " in hopper.header and "may differ" in hopper.header
    # The wgmma instructions come from the dot's source line.
    assert any("wgmma" in t for t in _texts_at(hopper, kernel.source.file, _dot_line(kernel)))
    assert ".loc" not in hopper.text and ".loc" in hopper.raw_text
    ampere = seed.lower("ptx:sm_80")
    assert ampere.ok and "mma.sync" in ampere.text and "wgmma" not in ampere.text


@needs_triton
def test_sass_and_gpu_resources(seed):
    kernel = seed.kernels[0]
    sass = seed.lower("sass:sm_90")
    assert sass.ok and "HGMMA" in sass.text and "//## File" not in sass.text
    assert any("HGMMA" in t for t in _texts_at(sass, kernel.source.file, _dot_line(kernel)))
    resources = sass.resources
    assert resources.arch == "sm_90" and resources.num_warps == 4
    assert 0 < resources.registers_per_thread <= 255
    assert resources.spill_store_bytes == 0 and resources.spill_load_bytes == 0
    # 3 pipeline stages of a 64x32 and a 32x64 bf16 tile: 24 KiB requested.
    assert resources.shared_bytes >= 3 * (64 * 32 + 32 * 64) * 2
    h100 = next(o for o in resources.occupancy if o.gpu == "H100")
    assert h100.same_arch and 0 < h100.blocks_per_sm <= 32
    assert {o.gpu for o in resources.occupancy} == set(hardware.GPUS)
    llir = seed.lower("llir:sm_90")
    assert llir.ok and "!dbg" not in llir.text and llir.source_map
    ttgir = seed.lower("ttgir:sm_90")
    assert ttgir.ok and "ttng.warp_group_dot" in ttgir.text


@needs_triton
def test_lowering_is_cached_per_kernel_and_target(seed):
    first = seed.lower("ptx:sm_90")
    started = time.perf_counter()
    again = seed.lower("ptx:sm_90")
    assert again is first and time.perf_counter() - started < 0.01


def test_a_target_that_cannot_take_the_kernel_explains_itself(seed):
    kernel = seed.kernels[0]
    mosaic_gpu = seed.lower("mosaic-gpu")
    assert not mosaic_gpu.ok and "Triton compiler params" in mosaic_gpu.error.message
    assert mosaic_gpu.error.location == kernel.call_site
    tpu = seed.lower("mosaic-tpu:v5e")
    assert not tpu.ok and tpu.error.kind == "tiling"
    # The other targets keep working.
    assert seed.lower("triton").ok and seed.lower("stablehlo:cuda").ok


def test_stablehlo_of_the_program(seed):
    here = seed.lower("stablehlo")
    assert here.ok and here.kernel == "" and "stablehlo" in here.text
    cuda = seed.lower("stablehlo:cuda")
    assert "__gpu$xla.gpu.triton" in cuda.text and "more characters elided" in cuda.text
    assert seed.lower("stablehlo:cuda", kernel=0) is cuda  # one per program


# ---------------------------------------------------------------------------
# The vector add: its add line maps to its addition in every IR.


@pytest.fixture(scope="module")
def vector_add():
    case = corpus.vector_add()
    return pallaslab.inspect(case.fn, *case.args)


@pytest.mark.parametrize(
    ("target", "instruction"),
    [("triton", "arith.addf"), ("mosaic-tpu:v5e", "arith.addf"), ("stablehlo", "add")],
)
def test_add_line_maps_to_its_addition(vector_add, target, instruction):
    kernel = vector_add.kernels[0]
    add_line = _line_of(kernel.source.file, "o_ref[:] = x + y", kernel.source.line)
    lowered = vector_add.lower(target)
    assert lowered.ok, lowered.error
    assert any(instruction in t for t in _texts_at(lowered, kernel.source.file, add_line))


@needs_triton
def test_add_line_maps_to_ptx_add(vector_add):
    kernel = vector_add.kernels[0]
    add_line = _line_of(kernel.source.file, "o_ref[:] = x + y", kernel.source.line)
    ptx = vector_add.lower("ptx:sm_90")
    assert any("add.f32" in t for t in _texts_at(ptx, kernel.source.file, add_line))
    assert f'.file\t1 "{kernel.source.file}"' in ptx.raw_text


def test_mosaic_gpu_module(vector_add):
    case = corpus.blocked_add()
    inspection = pallaslab.inspect(case.fn, *case.args)
    lowered = inspection.lower("mosaic-gpu")
    if notice := jax_adapter.mosaic_gpu_pallas_call_notice():  # jax 0.12: Triton only
        assert lowered.error.kind == "unavailable" and lowered.error.message == notice
        return
    assert lowered.ok and "gpu.launch" in lowered.text and "nvvm" in lowered.text
    assert "PTX" in " ".join(lowered.notes)  # says why PTX is out of reach
    kernel = inspection.kernels[0]
    add_line = _line_of(kernel.source.file, "x_ref[...] + y_ref[...]", kernel.source.line)
    assert any("arith.addf" in t for t in _texts_at(lowered, kernel.source.file, add_line))
    # Mosaic GPU cannot copy 32 bytes: that target alone shows the error.
    failed = vector_add.lower("mosaic-gpu")
    assert not failed.ok and "warpgroup" in failed.error.message
    assert failed.error.location is not None


# ---------------------------------------------------------------------------
# TPU: the shipped matmul, Mosaic and a real libtpu compile.


@pytest.fixture(scope="module")
def tpu_mm():
    x = S(512, 512, dtype=jnp.bfloat16)
    return pallaslab.inspect(functools.partial(tpu_matmul.matmul, block_shape=(128, 128)), x, x)


def test_mosaic_tpu_matmul(tpu_mm):
    lowered = tpu_mm.lower("mosaic-tpu:v5e")
    assert lowered.ok and "tpu.matmul" in lowered.text
    assert "stable_mosaic.version" in lowered.text and "base64" not in lowered.text
    resources = lowered.resources
    assert resources.chip == "v5e" and resources.vmem_capacity == 128 * 1024**2
    # x (128, 256) and y (256, 128) bf16 and o (128, 128) bf16, double-buffered,
    # plus the f32 accumulator.
    assert resources.vmem_bytes == 2 * (2 * 128 * 256 * 2 + 128 * 128 * 2) + 128 * 128 * 4
    kernel = tpu_mm.kernels[0]
    dot_line = _line_of(kernel.source.file, "jnp.dot(", kernel.source.line)
    assert any("tpu.matmul" in t for t in _texts_at(lowered, kernel.source.file, dot_line))


@needs_libtpu
def test_tpu_compile_gives_final_bundles(tpu_mm):
    lowered = tpu_mm.lower("tpu-compile:v5e")
    assert lowered.ok, lowered.error
    assert lowered.language == "llo" and "libtpu" in lowered.header
    resources = lowered.resources
    assert resources.bundles > 100 and 0 < resources.loop_body_bundles < resources.bundles
    assert resources.code_bytes > 0
    assert {u: mean for u, _, mean in resources.utilization}["MATMUL"] > 0
    kernel = tpu_mm.kernels[0]
    dot_line = _line_of(kernel.source.file, "jnp.dot(", kernel.source.line)
    assert any("vmatmul" in t for t in _texts_at(lowered, kernel.source.file, dot_line))
    names = [s.name for s in lowered.stages]
    assert "post-apply-vector-layout" in names and "compiled HLO" in names
    assert lowered.stage("apply-vector-layout").source_map
    # The IR tab's stage picker explains every name, "final" included.
    assert "VLIW bundles" in stagenames.final_title(lowered.target)
    titles = {name: stagenames.stage_title(name) for name in names}
    assert titles["post-apply-vector-layout"] == (
        "Mosaic TPU's module after its pass apply-vector-layout."
    )
    assert not [n for n, t in titles.items() if t.startswith("An intermediate text")], titles


# ---------------------------------------------------------------------------
# The (8, 128) rule, reported at the BlockSpec line before compiling.


def _bad_blocks():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((16, 1024), jnp.float32),
        grid=(2, 16),
        in_specs=[pl.BlockSpec((8, 64), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 64), lambda i, j: (i, j)),
    )


@pytest.mark.parametrize("target", ["mosaic-tpu:v5e", "tpu-compile:v5e"])
def test_tiling_rule_reported_at_the_blockspec(target):
    inspection = pallaslab.inspect(_bad_blocks(), S(16, 1024))
    lowered = inspection.lower(target)
    assert not lowered.ok and lowered.error.kind == "tiling"
    location = lowered.error.location
    assert location.file == __file__
    assert "pl.BlockSpec((8, 64)" in sources.lines(__file__)[location.line - 1]
    assert "last dimension 64" in lowered.error.message
    assert "(8, 128)" in lowered.error.message
    # The other backend is untouched (Triton takes power-of-two blocks).
    assert inspection.lower("triton").ok


def test_without_libtpu_the_tiling_rule_still_comes_first(monkeypatch):
    # The (8, 128) rule needs no libtpu: a machine without it still says what is
    # wrong with the kernel, and only a kernel that passes learns what is missing.
    import importlib.util

    from pallaslab._src.core.lowering import toolchains

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        toolchains.importlib.util,
        "find_spec",
        lambda name, *a, **k: None if name == "libtpu" else find_spec(name, *a, **k),
    )
    bad = pallaslab.inspect(_bad_blocks(), S(16, 1024)).lower("tpu-compile:v5e")
    assert bad.error.kind == "tiling"
    fine = corpus.kacc_matmul()
    missing = pallaslab.inspect(fine.fn, *fine.args).lower("tpu-compile:v5e")
    assert missing.error.kind == "unavailable"
    assert "pip install 'pallaslab[tpu]'" in missing.error.message


def test_tpu_only_kernel_on_gpu_points_at_its_params():
    case = corpus.kacc_matmul()
    inspection = pallaslab.inspect(case.fn, *case.args)
    lowered = inspection.lower("triton")
    assert not lowered.ok and "pltpu.CompilerParams" in lowered.error.message
    kernel = inspection.kernels[0]
    # Inspected directly, the kernel has no calling line: the error names its def.
    assert kernel.call_site is None
    assert lowered.error.location == kernel.source
    kacc = _line_of(corpus.__file__, "def kacc_matmul(")
    assert lowered.error.location.line == _line_of(corpus.__file__, "def kernel(", kacc)
    assert inspection.lower("mosaic-tpu:v5e").ok

    # Called from a program, it names the line of the program that calls it.
    def program(x, y):
        return case.fn(x, y) * 2  # the call

    called = pallaslab.inspect(program, *case.args)
    error = called.lower("triton").error
    assert called.kernels[0].call_site == error.location
    assert (error.location.file, error.location.line) == (
        __file__,
        _line_of(__file__, "# the call"),
    )


def test_the_params_error_does_not_depend_on_what_was_lowered_before():
    # JAX registers each Pallas backend's params when it first lowers for it: in a
    # fresh process nothing is registered, and the TPU kernel's message must not change.
    code = (
        "import pallaslab\n"
        "from tests import corpus\n"
        "case = corpus.kacc_matmul()\n"
        "print(pallaslab.inspect(case.fn, *case.args).lower('triton').error.message)\n"
    )
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'kernel' passes pltpu.CompilerParams (Mosaic TPU): GPU targets cannot take it." in (
        done.stdout
    )


def test_unsupported_primitive_points_at_its_line():
    def kernel(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = jnp.sort(x, axis=-1)

    fn = pl.pallas_call(kernel, out_shape=S(8, 128))
    inspection = pallaslab.inspect(fn, S(8, 128))
    lowered = inspection.lower("mosaic-tpu:v5e")
    if lowered.ok:
        pytest.skip("this JAX lowers sort on TPU")
    sort_line = _line_of(__file__, "jnp.sort(x, axis=-1)")
    location = lowered.error.location
    assert (location.file, location.line) == (__file__, sort_line)
    assert "sort" in lowered.error.message


# ---------------------------------------------------------------------------
# Every kernel of the corpus, on the targets its backend supports.

# Per corpus case: the targets every kernel of it must lower for.
CORPUS_TARGETS = {
    "vector_add": ("triton", "mosaic-tpu:v5e"),
    "blocked_add": ("triton", "mosaic-gpu", "mosaic-tpu:v5e"),
    "seed_matmul": ("triton",),
    "kacc_matmul": ("mosaic-tpu:v5e",),
    "row_softmax": ("triton",),
    "with_scratch": ("mosaic-tpu:v5e",),
    "templated": ("triton", "mosaic-gpu", "mosaic-tpu:v5e"),
    "vmapped": ("triton",),
    "two_kernels": ("triton", "mosaic-gpu", "mosaic-tpu:v5e"),
    "grad_custom_vjp": ("triton", "mosaic-gpu", "mosaic-tpu:v5e"),
    "scalar_prefetch": ("mosaic-tpu:v5e",),
    "element_halo": ("mosaic-tpu:v5e",),
    "pipelined_add": ("mosaic-tpu:v5e",),
    "tpu_mesh_kernel": ("mosaic-tpu:v5e",),
    "scatter_blocks": ("mosaic-tpu:v5e",),
    "triton_masked_add": ("triton",),
    "triton_rows_2d": ("triton",),
}


@pytest.mark.parametrize("make", corpus.ALL, ids=lambda m: m.__name__)
def test_corpus_kernels_lower_for_their_targets(make):
    case = make()
    inspection = pallaslab.inspect(case.fn, *case.args)
    assert inspection.lower("stablehlo").ok
    for kernel in inspection.kernels:
        for target in CORPUS_TARGETS[case.name]:
            lowered = inspection.lower(target, kernel.index)
            if target == "mosaic-gpu" and jax_adapter.mosaic_gpu_pallas_call_notice():
                # jax 0.12 lowers pallas_calls for GPUs with Triton only: said as such.
                assert lowered.error.kind == "unavailable", lowered.error
                assert "plgpu.kernel" in lowered.error.message
                continue
            assert lowered.ok, (target, lowered.error)
            assert lowered.text and lowered.source_map, target
            mapped_files = {f for _, f, _ in lowered.source_map}
            assert kernel.source.file in mapped_files, target
        for target in ("triton", "mosaic-tpu:v5e"):
            lowered = inspection.lower(target, kernel.index)
            if not lowered.ok:  # whatever fails says why, and where
                assert lowered.error.message and lowered.error.location is not None


# ---------------------------------------------------------------------------
# The kernels shipped with JAX.

GPU_OPS = {
    "softmax": (gpu_softmax.softmax, (S(64, 256),)),
    "layer_norm": (gpu_layer_norm.layer_norm, (S(4, 16, 256), S(256), S(256))),
    "rms_norm": (gpu_rms_norm.rms_norm, (S(4, 16, 256), S(256), S(256))),
    "attention": (gpu_attention.mha, (*(S(2, 256, 4, 64, dtype=jnp.float16),) * 3, None)),
    "decode_attention": (
        gpu_decode_attention.mqa,
        (S(2, 16, 64, dtype=jnp.float16), *(S(2, 1024, 64, dtype=jnp.float16),) * 2),
    ),
}


@needs_triton
@pytest.mark.parametrize("name", list(GPU_OPS))
def test_shipped_gpu_ops_lower_to_ptx(name):
    fn, args = GPU_OPS[name]
    inspection = pallaslab.inspect(fn, *args)
    assert inspection.kernels and all(k.backend == "triton" for k in inspection.kernels)
    for kernel in inspection.kernels:
        ttir = inspection.lower("triton", kernel.index)
        assert ttir.ok and "tt.func" in ttir.text, ttir.error
        ptx = inspection.lower("ptx:sm_90", kernel.index)
        assert ptx.ok, ptx.error
        assert ".entry" in ptx.text and ptx.resources.registers_per_thread > 0
        assert {f for _, f, _ in ptx.source_map} == {kernel.source.file}
    assert inspection.lower("stablehlo:cuda").ok


TPU_OPS = {
    "matmul": (
        functools.partial(tpu_matmul.matmul, block_shape=(128, 128)),
        (S(512, 512, dtype=jnp.bfloat16),) * 2,
    ),
    "flash_attention": (tpu_flash_attention.flash_attention, (S(1, 2, 256, 128),) * 3),
}


@pytest.mark.parametrize("name", list(TPU_OPS))
def test_shipped_tpu_ops_lower_for_every_chip(name):
    fn, args = TPU_OPS[name]
    inspection = pallaslab.inspect(fn, *args)
    for kernel in inspection.kernels:
        for chip in targets.TPU_CHIPS:
            lowered = inspection.lower(f"mosaic-tpu:{chip}", kernel.index)
            assert lowered.ok, (chip, lowered.error)
            assert lowered.resources.vmem_bytes < lowered.resources.vmem_capacity
    assert inspection.lower("stablehlo:tpu").ok


@needs_libtpu
def test_flash_attention_compiles_with_libtpu():
    fn, args = TPU_OPS["flash_attention"]
    inspection = pallaslab.inspect(fn, *args)
    lowered = inspection.lower("tpu-compile:v6e")
    assert lowered.ok, lowered.error
    assert lowered.resources.bundles > 0 and lowered.source_map
    kernel = inspection.kernels[0]
    assert {f for _, f, _ in lowered.source_map} == {kernel.source.file}


def test_unknown_target_and_kernel(seed):
    with pytest.raises(ValueError, match="unknown target"):
        seed.lower("ptx:sm_42")
    with pytest.raises(KeyError, match="no kernel"):
        seed.lower("triton", kernel="nope")


def test_kernels_built_for_interpret_mode_still_lower():
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    fn = pl.pallas_call(kernel, out_shape=S(8, 128), interpret=True)
    lowered = pallaslab.inspect(fn, S(8, 128)).lower("mosaic-tpu:v5e")
    assert lowered.ok and re.search(r"arith\.addf", lowered.text)


def test_plgpu_kernels_lower_for_mosaic_gpu():
    from jax.experimental.pallas import mosaic_gpu as plgpu

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3.0

    @jax.jit
    def double(x):
        return plgpu.kernel(body, out_type=S(256), grid=(2,), grid_names=("x",))(x)

    inspection = pallaslab.inspect(double, S(256))
    lowered = inspection.lower("mosaic-gpu")
    assert lowered.ok, lowered.error
    mul_line = _line_of(__file__, "o_ref[...] = x_ref[...] * 3.0")
    assert any("arith.mulf" in t for t in _texts_at(lowered, __file__, mul_line))
    triton = inspection.lower("triton")
    assert not triton.ok and "Mosaic GPU" in triton.error.message


def test_the_cache_lives_and_dies_with_its_program():
    import gc

    from pallaslab._src.core.lowering import engine

    case = corpus.vector_add()
    inspection = pallaslab.inspect(case.fn, *case.args)
    inspection.lower("triton")
    key = id(program_of(inspection))
    assert key in engine._LOWERERS
    del inspection
    gc.collect()
    assert key not in engine._LOWERERS
