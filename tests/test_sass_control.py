"""SASS control codes decoded against the published Volta+ encoding, and checked on real code.

Oracles: the bit layout published by Jia et al. ("Dissecting the NVIDIA Volta GPU
Architecture via Microbenchmarking", 2018; the turingas and CuAssembler assemblers
use it): stall bits 41-44 of the second 64-bit word, yield 45 (0: yield), write
barrier 46-48 and read barrier 49-51 (7: none), wait mask 52-57, reuse 58-61.
An encoder written here from that layout, known instructions ptxas made for sm_90
(their words as nvdisasm -hex prints them, decoded by hand), and nvdisasm's own text:
its `.reuse` operand marks must match the decoded reuse bits, and every wait must
follow an instruction that sets that scoreboard.
"""

from __future__ import annotations

import importlib.util
import subprocess

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallaslab
from pallaslab._src.core import cost, gpu_toolchain
from pallaslab._src.core.lowering import sass_control, sourcemap


def encode(stall, yield_hint, write, read, wait_mask, reuse, low_bits=0):
    """The second word of an instruction, from the published layout (7: no barrier)."""
    control = (
        stall
        | (0 if yield_hint else 1) << 4
        | (7 if write is None else write) << 5
        | (7 if read is None else read) << 8
        | wait_mask << 11
        | reuse << 17
    )
    return control << 41 | low_bits


@pytest.mark.parametrize(
    "fields",
    [
        (0, True, None, None, 0, 0),
        (15, False, 5, 4, 0b111111, 0b1111),
        (4, True, 3, None, 0b001000, 0),
        (1, False, None, 0, 0b000001, 0b0001),
    ],
)
def test_decoding_inverts_the_published_layout(fields):
    word = encode(*fields, low_bits=0x1E1900)  # the low bits are opcode, not control
    control = sass_control.decode(word)
    assert (
        control.stall,
        control.yield_hint,
        control.write_barrier,
        control.read_barrier,
        control.wait_mask,
        control.reuse,
    ) == fields


# Instructions ptxas 12.9 made for sm_90 (an element-wise add), with their second words as
# nvdisasm -hex prints them, and their control decoded by hand from the layout above:
# 0x000ee8... -> bits 41+: 0x774 = stall 4, yield bit 1 (no yield), write 3, read 7, wait 0.
KNOWN = [
    ("S2R R9, SR_TID.X", 0x000E2E0000002100, "[B------:R-:W0:-:S07]"),
    ("IMAD.WIDE.U32 R2, R9, 0x4, R2", 0x001FC800078E0002, "[B0-----:R-:W-:Y:S04]"),
    ("IMAD.WIDE.U32 R4, R9.reuse, 0x4, R4", 0x042FE400078E0004, "[B-1----:R-:W-:-:S02]"),
    ("LDG.E R2, desc[UR4][R2.64]", 0x000EE8000C1E1900, "[B------:R-:W3:-:S04]"),
    ("FADD R9, R2, R5", 0x008FCA0000000000, "[B---3--:R-:W-:Y:S05]"),
    ("STG.E desc[UR4][R6.64], R9", 0x000FE2000C101904, "[B------:R-:W-:-:S01]"),
]


@pytest.mark.parametrize(("text", "word", "notation"), KNOWN)
def test_known_instructions_decode_by_hand(text, word, notation):
    control = sass_control.decode(word)
    assert str(control) == notation
    # R9.reuse is the first source operand (A): reuse bit 0.
    assert control.reuse == (1 if ".reuse" in text else 0)


@pytest.mark.parametrize(
    ("text", "opcode", "kind"),
    [
        ("@!P0 LDG.E.64 R2, desc[UR4][R2.64]", "LDG", "global"),
        ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24", "HGMMA", "tensor"),
        ("LDSM.16.M88.4 R8, [R2]", "LDSM", "shared"),
        ("UTMALDG.2D [UR8], [UR4]", "UTMALDG", "async"),
        ("FFMA R1, R2, R3, R4", "FFMA", "fp"),
        ("MUFU.EX2 R5, R5", "MUFU", "sfu"),
        ("IADD3 R1, R2, R3, RZ", "IADD3", "int"),
        ("BRA `(.L_x_1)", "BRA", "control"),
        ("LDC R1, c[0x0][0x28]", "LDC", "const"),
    ],
)
def test_instruction_classes(text, opcode, kind):
    assert sass_control.opcode(text) == opcode
    assert sass_control.instruction_class(opcode) == kind


PTX = """\
.version 8.0
.target sm_90
.address_size 64
.visible .entry add(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n)
{
  .reg .b64 %rd<8>; .reg .f32 %f<8>; .reg .b32 %r<8>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b]; ld.param.u64 %rd3, [c];
  ld.param.u32 %r2, [n];
  mov.u32 %r1, %tid.x; mov.f32 %f4, 0f00000000;
LOOP:
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd1, %rd4; add.s64 %rd6, %rd2, %rd4;
  ld.global.f32 %f1, [%rd5]; ld.global.f32 %f2, [%rd6];
  fma.rn.f32 %f4, %f1, %f2, %f4;
  add.u32 %r1, %r1, 128;
  setp.lt.u32 %p1, %r1, %r2;
  @%p1 bra LOOP;
  mul.wide.u32 %rd4, %r1, 4; add.s64 %rd7, %rd3, %rd4;
  st.global.f32 [%rd7], %f4;
  ret;
}
"""


def _disassemble(tmp_path):
    chain = gpu_toolchain.toolchain()
    if not chain.ptxas or not chain.nvdisasm:
        pytest.skip("needs ptxas and nvdisasm (pallaslab[gpu-compile])")
    (tmp_path / "add.ptx").write_text(PTX)
    subprocess.run(
        [chain.ptxas, "-arch=sm_90", str(tmp_path / "add.ptx"), "-o", str(tmp_path / "add.cubin")],
        check=True,
    )

    def run(*flags):
        command = [chain.nvdisasm, "-c", *flags, str(tmp_path / "add.cubin")]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout

    return run("-hex"), run()


def test_real_code_obeys_its_scoreboards(tmp_path):
    listing, plain = _disassemble(tmp_path)
    found = sass_control.instructions(sourcemap.sass_instructions(listing))
    assert found and all(i.control is not None for i in found)
    set_so_far: set[int] = set()
    for instruction in found:
        control = instruction.control
        assert control is not None
        # A wait names scoreboards an earlier instruction set (a loop's carry included).
        if instruction.address not in {first for first, _ in _loops(found, listing)}:
            assert set(control.waits) <= set_so_far | _loop_barriers(found, listing), instruction
        for barrier in (control.write_barrier, control.read_barrier):
            if barrier is not None:
                set_so_far.add(barrier)
        # nvdisasm writes `.reuse` on the operands whose reuse bit is set.
        assert (control.reuse != 0) == (".reuse" in instruction.text), instruction
        if instruction.opcode == "LDG":
            assert control.write_barrier is not None  # a variable-latency load
    # Each multiply-add waits on a scoreboard a global load set: its operands.
    load_barriers = {i.control.write_barrier for i in found if i.opcode == "LDG" and i.control}
    fmas = [i for i in found if i.opcode == "FFMA"]
    assert fmas and all(set(f.control.waits) & load_barriers for f in fmas if f.control)
    # The loop: a branch back.
    assert _loops(found, listing)
    # The text without encodings is nvdisasm's own without -hex.
    text, _ = sourcemap.sass_text(listing)
    assert text.split() == sourcemap.sass_text(plain)[0].split()


def _loops(found, listing):
    return sass_control.loops(found, sass_control.labels(listing))


def _loop_barriers(found, listing):
    barriers = set()
    for first, last in _loops(found, listing):
        for i in found:
            if first <= i.address <= last and i.control is not None:
                barriers |= {
                    b for b in (i.control.write_barrier, i.control.read_barrier) if b is not None
                }
    return barriers


needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="needs the triton package"
)


def _scale_kernel(x_ref, o_ref):
    o_ref[...] = jnp.exp(x_ref[...]) * 2.0


@needs_triton
def test_gpu_cost_per_line_of_a_triton_build():
    from jax.experimental.pallas import triton as pltriton

    spec = jax.ShapeDtypeStruct((1024,), jnp.float32)
    call = pl.pallas_call(
        _scale_kernel,
        out_shape=spec,
        grid=(8,),
        in_specs=[pl.BlockSpec((128,), lambda i: (i,))],
        out_specs=pl.BlockSpec((128,), lambda i: (i,)),
        compiler_params=pltriton.CompilerParams(num_warps=4),
    )
    inspection = pallaslab.inspect(call, spec)
    lowered = inspection.lower("sass:sm_90")
    if lowered.error is not None:
        pytest.skip(f"sass:sm_90 unavailable: {lowered.error.message}")
    table = cost.of_lowered(lowered)
    assert table.kind == "gpu" and table.total_instructions > 0
    line = table.line(inspection.kernels[0].source.file, inspection.kernels[0].source.line + 1)
    assert line is not None and line.instructions > 0
    assert line.unit("sfu") >= 1  # exp: MUFU.EX2
    assert line.unit("global") >= 1  # its load (or store)
    assert line.unit("control") <= 2  # padding NOPs after EXIT are no line's
    assert line.stall_cycles > 0 and line.waits >= 1
    assert sum(c.instructions for c in table.lines) + table.unattributed == table.total_instructions
    frame = inspection.cost("sass:sm_90")
    assert {"sfu", "stall_cycles", "waits"} <= set(frame.columns)
    assert "0x0" not in lowered.text.split("/*0000*/")[-1].split("\n")[0][60:]  # no encodings shown
