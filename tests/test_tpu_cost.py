"""Static cost per source line from TPU bundles, against hand counts and libtpu's own tallies.

Oracles: a bundle listing typed here in libtpu's format and counted by hand; a tiny
kernel whose ops follow from its block (8 x 1024 float32 = 8 vector registers: 16
loads, 8 adds, 8 stores per grid step); libtpu's per-bundle utilization, whose issue
columns (VALU, VPOP, VLOAD, VSTORE, SALU) must equal pallaslab's slot of every op.
"""

from __future__ import annotations

import collections
import importlib.util

import pytest

from pallaslab._src.core import cost
from pallaslab._src.core.lowering import tpu_bundles
from pallaslab._src.records.lowered import Lowered, Stage
from tests.test_fit import inspect_add

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None, reason="needs libtpu (pallaslab[tpu])"
)

UTILIZATION = """\
== CAPACTIY:
MATMUL, MATPUSH, XLU, VALU, VPOP, EUP, VLOAD, VLOAD:FILL, VSTORE, VSTORE:SPILL, SALU
    4     4     3     4     2     1     3     3     1     1     2
== UTILIZATION:
"""


def listing(file: str) -> str:
    loc = f'/* loc("{file}":%d:4 to :20) */'
    return "\n".join(
        [
            "= control target key start",
            "LB: loop body",
            "= control target key end",
            "",
            "     0   :  { %s10_s0 = inlined_call_operand.hbm [shape: f32[16,128], index: 0, "
            "kind: input, shape index: {}]  ;;  %7 = vsyncpa [#allocation4], 0 }",
            "   0x1   :  { %s20_s1 = smov.u32 0 }",
            f"   0x2 LB: > {{ %v1_v0 = vld [vmem:[%s1] sm:$0xff] {loc % 7}  ;;  "
            f"%v2_v1 = vld [vmem:[%s2] sm:$0xff] {loc % 7}  ;;  %s3_s2 = sadd.s32 1, %s20_s1 }}",
            f"   0x3   : > {{ %v3_v2 = vadd.f32 %v1_v0, %v2_v1 {loc % 7}  ;;  "
            f"%v4 = vmul.f32 %v3_v2, %v3_v2 {loc % 8} }}",
            f"   0x4   : > {{ %5 = vst [vmem:[%s4] sm:$0xff] %v4 {loc % 8}  ;;  "
            "%s6 = sphi %s1, %s2  ;;  %p7 = scmp.lt.s32.totalorder %s3_s2, 4 }",
            "   0x5   :  { %9 = vsyncpa [#allocation4], 1 } /* exit bundle */",
        ]
    )


def test_a_listing_counted_by_hand(tmp_path):
    source = tmp_path / "k.py"
    source.write_text("".join(f"# line {n}\n" for n in range(1, 11)))
    text = listing(str(source))
    bundles = tpu_bundles.parse(text)
    assert [b.address for b in bundles] == [0, 1, 2, 3, 4, 5]
    assert [b.depth for b in bundles] == [0, 0, 1, 1, 1, 0]
    lowered = Lowered(
        "tpu-compile:v5e",
        "k",
        0,
        "llo",
        "",
        text,
        raw_text=text,
        stages=(Stage("per-bundle utilization", UTILIZATION, "text"),),
    )
    table = cost.tpu_cost(lowered)
    line7, line8 = table.line(str(source), 7), table.line(str(source), 8)
    assert line7 is not None and line8 is not None
    # Line 7: two loads and an add, in bundles 0x2 and 0x3.
    assert (line7.instructions, line7.bundles, dict(line7.units)) == (3, 2, {"vld": 2, "VPU": 1})
    # Line 8: a multiply and a store, in bundles 0x3 and 0x4.
    assert (line8.instructions, line8.bundles, dict(line8.units)) == (2, 2, {"VPU": 1, "vst": 1})
    assert line7.loop_instructions == 3 and line8.loop_instructions == 2
    # 10 ops take a slot (inlined_call_operand and sphi do not); 5 belong to no line:
    # two vsyncpa, smov, sadd, scmp.
    assert (table.total_instructions, table.unattributed) == (10, 5)
    assert (table.total_bundles, table.loop_bundles, table.cycles_estimate) == (6, 3, 3)
    slots = {unit: (used, offered) for unit, used, offered in table.loop_slots}
    # In the 3 loop bundles: 2 loads of 3 x 3 slots, 2 VPU ops of 4 x 3, 2 scalar of 2 x 3.
    assert slots["vld"] == (2, 9) and slots["VPU"] == (2, 12) and slots["scalar"] == (2, 6)
    assert slots["MXU"] == (0, 24)  # its MATMUL and MATPUSH columns
    assert table.line(str(source), 9) is None


@pytest.mark.parametrize(
    ("opcode", "unit", "slot"),
    [
        ("vmatpush.bf16.msra.mxu0", "MXU", "MXU"),
        ("vpop.f32.mrf.mxu1", "MXU", "VPOP"),
        ("vmax.xlane.f32.xlu0", "XLU", "XLU"),
        ("vpop.trf.xlu2", "XLU", "VPOP"),
        ("vexp2.f32", "EUP", "VALU"),
        ("vpop.erf", "EUP", "VPOP"),
        ("vadd.f32", "VPU", "VALU"),
        ("vmor", "VPU", "VLOAD"),
        ("vsyncpa", "sync", "VLOAD"),
        ("dma.done.wait", "sync", "VLOAD"),
        ("dma.hbm_to_vmem", "DMA", "SALU"),
        ("scalar_lea.vmem", "scalar", "SALU"),
        ("sphi", None, None),
        ("inlined_call_operand.hbm", None, None),
    ],
)
def test_units_and_slots_of_opcodes(opcode, unit, slot):
    assert tpu_bundles.unit_of(opcode) == unit
    assert tpu_bundles.slot_of(opcode) == slot


@needs_libtpu
@pytest.mark.slow
def test_a_tiny_kernel_against_its_hand_count_and_libtpus_utilization():
    inspection = inspect_add(8)  # (8, 1024) float32 blocks: 8 vector registers each
    lowered = inspection.lower("tpu-compile:v5e")
    assert lowered.error is None
    table = inspection.cost_table("tpu-compile:v5e")
    [line] = table.lines
    assert line.line == inspection.kernels[0].source.line + 1  # o_ref[...] = x + y
    assert dict(line.units) == {"vld": 16, "VPU": 8, "vst": 8}
    assert line.loop_instructions == 32  # one grid step, in the body's loop
    # libtpu's own per-bundle tally of issue slots equals pallaslab's slot of each op.
    bundles = tpu_bundles.parse(lowered.raw_text)
    rows = lowered.stage("per-bundle utilization").text.split("== UTILIZATION:")[1].split("\n")
    rows = [list(map(int, row.split())) for row in rows if row.strip() and row.split()[0].isdigit()]
    header = lowered.stage("per-bundle utilization").text.splitlines()
    units = [u.strip() for u in header[header.index("== CAPACTIY:") + 1].split(",")]
    assert len(rows) == len(bundles) == table.total_bundles
    for bundle, row in zip(bundles, rows, strict=True):
        slots = collections.Counter(tpu_bundles.slot_of(op.opcode) for op in bundle.ops)
        for column in ("VALU", "VPOP", "VLOAD", "VSTORE", "SALU"):
            assert slots[column] == row[units.index(column)], (hex(bundle.address), column)
    frame = inspection.cost("tpu-compile:v5e")
    assert frame.loc[0, "vld"] == 16 and frame.attrs["cycles_estimate"] == table.loop_bundles
    # The IR tab's gutter: the same figures beside the source line.
    from pallaslab._src.views.static_page import static_tab
    from pallaslab._src.views.tabs import ir

    summary = ir.summary(inspection, lowered, {"stage": ""})
    [entry] = summary["costs"]
    assert entry["line"] == line.line and entry["text"] == f"{line.bundles}b vld 16 VPU 8"
    assert f"{table.loop_bundles} bundles per pass" in summary["costNote"]
    assert ir.summary(inspection, lowered, {"stage": "LLO (original)"})["costs"] == []
    assert f"{line.bundles}b vld 16 VPU 8" in static_tab(inspection, "ir")


def test_cost_of_an_ir_target_says_what_to_ask_for():
    with pytest.raises(cost.CostUnavailableError, match="tpu-compile"):
        inspect_add(8).cost("mosaic-tpu:v5e")
